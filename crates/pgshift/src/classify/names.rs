//! Names out of syntax trees, and the names PostgreSQL would choose for constraints.

use pgshift_sql::ast::{Node, RangeVar};
use pgshift_sql::{NodeEnum, QualifiedName};

/// The name a `RangeVar` denotes, as written.
pub(crate) fn range_var_name(range_var: &RangeVar) -> QualifiedName {
    QualifiedName {
        schema: Some(range_var.schemaname.clone()).filter(|s| !s.is_empty()),
        name: range_var.relname.clone(),
    }
}

/// The strings of a list of `String` nodes (`names` of a function, a type, an object).
pub(crate) fn strings(nodes: &[Node]) -> Vec<String> {
    nodes
        .iter()
        .filter_map(|node| match &node.node {
            Some(NodeEnum::String(s)) => Some(s.sval.clone()),
            _ => None,
        })
        .collect()
}

/// A qualified name from a list of name parts (`[schema, name]` or `[name]`); the last
/// `skip_last` parts (for example a trigger's own name) are left out.
pub(crate) fn qualified_from_parts(parts: &[String], skip_last: usize) -> Option<QualifiedName> {
    let keep = parts.len().checked_sub(skip_last)?;
    match &parts[..keep] {
        [name] => Some(QualifiedName::bare(name.clone())),
        [schema, name] => Some(QualifiedName::qualified(schema.clone(), name.clone())),
        [_catalog, schema, name] => Some(QualifiedName::qualified(schema.clone(), name.clone())),
        _ => None,
    }
}

/// The name parts of a `List` of `String` nodes (a dropped object's name).
pub(crate) fn name_parts(node: &Node) -> Vec<String> {
    strings(list_items(node))
}

/// The list items of a `List` node.
pub(crate) fn list_items(node: &Node) -> &[Node] {
    match &node.node {
        Some(NodeEnum::List(list)) => &list.items,
        _ => &[],
    }
}

/// PostgreSQL's own limit on identifier length, in bytes.
const NAMEDATALEN_MAX: usize = 63;

/// The name PostgreSQL gives an unnamed constraint, following its `makeObjectName`
/// rule: `<table>_<columns>_<suffix>`, with the table and column parts shortened
/// (longest first) so the whole fits in 63 bytes. Collisions with existing names (which
/// PostgreSQL resolves by appending digits) are not considered here.
///
/// ```
/// assert_eq!(pgshift::classify::constraint_name_for("events", &["kind"], "check"), "events_kind_check");
/// ```
pub fn constraint_name_for(table: &str, columns: &[&str], suffix: &str) -> String {
    let mut first = table.to_owned();
    let mut second = columns.join("_");
    let overhead = suffix.len() + 1 + usize::from(!second.is_empty());
    let budget = NAMEDATALEN_MAX.saturating_sub(overhead);
    while first.len() + second.len() > budget {
        if first.len() > second.len() {
            pop_char(&mut first);
        } else {
            pop_char(&mut second);
        }
    }
    if second.is_empty() {
        format!("{first}_{suffix}")
    } else {
        format!("{first}_{second}_{suffix}")
    }
}

/// The name PostgreSQL's `ChooseConstraintName` gives an unnamed constraint: the first
/// of `<table>_<columns>_<label>`, `…_<label>1`, `…_<label>2`, … that `taken` does not
/// hold (every constraint name of the table's schema, and those chosen before it in the
/// same statement or input).
pub(crate) fn choose_constraint_name(
    table: &str,
    columns: &[&str],
    label: &str,
    taken: impl Fn(&str) -> bool,
) -> String {
    let mut pass = 0u32;
    loop {
        let modified = if pass == 0 {
            label.to_owned()
        } else {
            format!("{label}{pass}")
        };
        let name = constraint_name_for(table, columns, &modified);
        if !taken(&name) {
            return name;
        }
        pass += 1;
    }
}

fn pop_char(text: &mut String) {
    text.pop();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constraint_names_follow_postgres_shortening() {
        assert_eq!(constraint_name_for("t", &[], "check"), "t_check");
        assert_eq!(constraint_name_for("t", &["a", "b"], "fkey"), "t_a_b_fkey");
        let long = "x".repeat(60);
        let name = constraint_name_for(&long, &["column"], "check");
        assert!(name.len() <= 63, "{name}");
        assert!(name.ends_with("_column_check"), "{name}");
    }

    #[test]
    fn an_unnamed_constraint_takes_the_first_free_name_as_postgres_does() {
        let taken = ["t_check", "t_check1", "t_a_check"];
        let free = |name: &str| taken.contains(&name);
        assert_eq!(choose_constraint_name("t", &[], "check", free), "t_check2");
        assert_eq!(
            choose_constraint_name("t", &["a"], "check", free),
            "t_a_check1"
        );
        assert_eq!(
            choose_constraint_name("t", &["b"], "check", free),
            "t_b_check"
        );
    }
}
