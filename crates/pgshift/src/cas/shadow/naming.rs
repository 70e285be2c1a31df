//! The names PostgreSQL would choose on the real table for what the statement
//! added on the scratch table.

use pgshift_sql::{quote_ident, QualifiedName};
use tokio_postgres::Client;

use super::relations::{Relation, SourceIndexFacts};
use super::{db, run};
use crate::cas::error::CasError;
use crate::cas::plan::RunPlan;

/// PostgreSQL's `makeObjectName`: `name1_name2_label`, the longer of the two names
/// cut first (on a character boundary) to fit 63 bytes.
pub(super) fn make_object_name(name1: &str, name2: Option<&str>, label: &str) -> String {
    fn clip(s: &str, len: usize) -> &str {
        let mut end = len.min(s.len());
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        &s[..end]
    }
    let overhead = usize::from(name2.is_some()) + label.len() + 1;
    let available = 63usize.saturating_sub(overhead);
    let (mut n1, mut n2) = (name1.len(), name2.map_or(0, str::len));
    while n1 + n2 > available {
        if n1 > n2 {
            n1 -= 1;
        } else {
            n2 -= 1;
        }
    }
    let mut out = clip(name1, n1).to_owned();
    if let Some(name2) = name2 {
        out.push('_');
        out.push_str(clip(name2, n2));
    }
    out.push('_');
    out.push_str(label);
    out
}

/// The name PostgreSQL would choose on the real table for an object it named `name`
/// on the scratch table (same table name, so the same `name1`): the same `name2` and
/// label, with the first free pass number (`ChooseRelationName` /
/// `ChooseConstraintName`), given what is `taken`. `None` when `name` is not one
/// PostgreSQL chose (the statement named it).
pub(super) fn choose_name(
    table: &str,
    name: &str,
    labels: &[&str],
    taken: &dyn Fn(&str) -> bool,
) -> Option<String> {
    let rest = name.strip_prefix(table)?.strip_prefix('_').unwrap_or("");
    let (name2, label) = labels.iter().find_map(|label| {
        let trimmed = rest.trim_end_matches(|c: char| c.is_ascii_digit());
        if trimmed == *label {
            return Some((None, *label));
        }
        let name2 = trimmed.strip_suffix(label)?.strip_suffix('_')?;
        Some((Some(name2), *label))
    })?;
    if make_object_name(table, name2, label) != name
        && !(1..100).any(|pass| make_object_name(table, name2, &format!("{label}{pass}")) == name)
    {
        return None;
    }
    (0..1000).find_map(|pass| {
        let label = if pass == 0 {
            label.to_owned()
        } else {
            format!("{label}{pass}")
        };
        let candidate = make_object_name(table, name2, &label);
        (!taken(&candidate)).then_some(candidate)
    })
}

/// The names the statement gave what it added to the table are PostgreSQL's for the
/// real table, except that on the scratch table it could not see the other relations
/// and constraints of the real schema: a name taken there moves on to the next pass
/// number, as `ChooseRelationName` and `ChooseConstraintName` would have.
pub(super) async fn choose_names(
    client: &Client,
    plan: &RunPlan,
    tree: &[Relation],
    source_indexes: &[SourceIndexFacts],
    scratch_schema: &str,
    schema: &str,
) -> Result<(), CasError> {
    let oids: Vec<u32> = tree.iter().map(|r| r.oid).collect();
    // Relation and constraint names of the real schema, but for the source tree's
    // (the scratch tree has those), and of the scratch schema.
    let rows = client
        .query(
            "SELECT c.relname::pg_catalog.text, n.nspname OPERATOR(pg_catalog.=) $2::pg_catalog.text \
               FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
              WHERE (n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_index i \
                       WHERE i.indexrelid OPERATOR(pg_catalog.=) c.oid AND i.indrelid OPERATOR(pg_catalog.=) ANY ($3::pg_catalog.oid[]))) \
                 OR n.nspname OPERATOR(pg_catalog.=) $2::pg_catalog.text \
             UNION SELECT con.conname::pg_catalog.text, n.nspname OPERATOR(pg_catalog.=) $2::pg_catalog.text \
               FROM pg_catalog.pg_constraint con JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) con.connamespace \
              WHERE (n.nspname OPERATOR(pg_catalog.=) $1::pg_catalog.text AND con.conrelid OPERATOR(pg_catalog.<>) ALL ($3::pg_catalog.oid[])) \
                 OR n.nspname OPERATOR(pg_catalog.=) $2::pg_catalog.text",
            &[&schema, &scratch_schema, &oids],
        )
        .await
        .map_err(db("reading the names in use"))?;
    let mut real: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut scratch_names: std::collections::HashSet<String> = std::collections::HashSet::new();
    for row in &rows {
        if row.get::<_, bool>(1) {
            scratch_names.insert(row.get(0));
        } else {
            real.insert(row.get(0));
        }
    }
    let table = &tree[0].name.name;
    let scratch = &tree[0].scratch;
    let added = client
        .query(
            "SELECT con.conname::pg_catalog.text, con.contype::pg_catalog.text, con.contype OPERATOR(pg_catalog.=) ANY ('{p,u,x}') \
               FROM pg_catalog.pg_constraint con \
              WHERE con.conrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1) ORDER BY con.oid",
            &[&scratch.to_string()],
        )
        .await
        .map_err(db("reading the shadow's constraints"))?;
    let known = |name: &str| {
        plan.source.constraints.iter().any(|c| c.name == name)
            || source_indexes
                .iter()
                .any(|i| i.relation == 0 && i.name == name)
    };
    for row in added {
        let (name, kind, indexed): (String, String, bool) = (row.get(0), row.get(1), row.get(2));
        if known(&name) {
            continue;
        }
        let labels: &[&str] = match kind.as_str() {
            "p" => &["pkey"],
            "u" => &["key"],
            "x" => &["excl"],
            "c" => &["check"],
            "f" => &["fkey"],
            "n" => &["not_null"],
            _ => continue,
        };
        let taken = |c: &str| real.contains(c) || (c != name && scratch_names.contains(c));
        let Some(chosen) = choose_name(table, &name, labels, &taken) else {
            continue;
        };
        if chosen != name {
            let sql = if indexed {
                format!(
                    "ALTER INDEX {} RENAME TO {}",
                    QualifiedName::qualified(scratch_schema, name.clone()),
                    quote_ident(&chosen)
                )
            } else {
                format!(
                    "ALTER TABLE {scratch} RENAME CONSTRAINT {} TO {}",
                    quote_ident(&name),
                    quote_ident(&chosen)
                )
            };
            run(client, "naming what the statement added", &sql).await?;
            scratch_names.remove(&name);
        }
        scratch_names.insert(chosen);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::statement::constraint_with_storage;
    use super::*;

    #[test]
    fn names_are_chosen_as_postgres_chooses_them() {
        assert_eq!(
            make_object_name("booking", Some("code"), "key"),
            "booking_code_key"
        );
        let long = "x".repeat(60);
        let name = make_object_name(&long, Some("during"), "excl");
        assert_eq!(name.len(), 63, "{name}");
        assert!(
            name.ends_with("_during_excl") || name.ends_with("_excl"),
            "{name}"
        );
        let taken = |c: &str| c == "booking_code_key" || c == "booking_code_key1";
        assert_eq!(
            choose_name("booking", "booking_code_key", &["key"], &taken).as_deref(),
            Some("booking_code_key2")
        );
        assert_eq!(
            choose_name("booking", "booking_room_check", &["check"], &|_| false).as_deref(),
            Some("booking_room_check")
        );
        assert_eq!(choose_name("booking", "my_name", &["key"], &|_| true), None);
        assert_eq!(
            choose_name("booking", "booking_pkey", &["pkey"], &|c| c
                == "booking_pkey")
            .as_deref(),
            Some("booking_pkey1")
        );
        assert_eq!(
            constraint_with_storage("UNIQUE (code)", &["fillfactor=70".to_owned()], Some("fast"))
                .expect("parses"),
            "UNIQUE (code) WITH (fillfactor='70') USING INDEX TABLESPACE fast"
        );
    }
}
