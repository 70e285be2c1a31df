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
}
