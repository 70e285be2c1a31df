//! What follows the table's name at the swap, as statements of the swap's batch:
//! identity and owned sequences, the user triggers with their comments and enable
//! states, foreign keys of other tables, publication membership and the replica
//! identity. Each builder reads only the plan; the catalog was read before.

use super::RunPlan;
use pgshift_sql::{quote_ident, quote_literal};

/// Identity sequences continue where the source's stopped; owned (serial) sequences
/// change owner to the new table's column. These name the shadow by its own name, so
/// they run before the renames.
pub(super) fn sequences(plan: &RunPlan) -> Vec<String> {
    plan.source
        .sequences
        .iter()
        .filter(|sequence| plan.columns.iter().any(|c| c.name == sequence.column))
        .map(|sequence| {
            if sequence.identity {
                format!(
                    "SELECT pg_catalog.setval(pg_catalog.pg_get_serial_sequence({}, {}), s.last_value, s.is_called) FROM {} s",
                    quote_literal(&plan.shadow.to_string()),
                    quote_literal(&sequence.column),
                    sequence.sequence
                )
            } else {
                format!(
                    "ALTER SEQUENCE {} OWNED BY {}.{}",
                    sequence.sequence,
                    plan.shadow,
                    quote_ident(&sequence.column)
                )
            }
        })
        .collect()
}

/// The source's user triggers, recreated on the new table with their names,
/// definitions, comments and enable states (on the parent and on each partition).
/// After the renames: the definitions name the table.
pub(super) fn triggers(plan: &RunPlan) -> Vec<String> {
    let mut sql: Vec<String> = plan
        .source
        .triggers
        .iter()
        .filter(|t| !t.clone)
        .map(|t| t.definition.clone())
        .collect();
    for trigger in &plan.source.triggers {
        if let Some(comment) = &trigger.comment {
            sql.push(format!(
                "COMMENT ON TRIGGER {} ON {} IS {}",
                quote_ident(&trigger.name),
                trigger.on,
                quote_literal(comment)
            ));
        }
        let action = match trigger.enabled.as_str() {
            "A" => "ENABLE ALWAYS",
            "R" => "ENABLE REPLICA",
            "D" => "DISABLE",
            _ if trigger.clone => "ENABLE",
            _ => continue,
        };
        sql.push(format!(
            "ALTER TABLE {}{} {action} TRIGGER {}",
            if trigger.clone { "ONLY " } else { "" },
            trigger.on,
            quote_ident(&trigger.name)
        ));
    }
    sql
}

/// Foreign keys of other tables, re-pointed at the new table `NOT VALID` (validated
/// after the swap), with their comments: the statements, and the keys by name.
pub(super) fn incoming_foreign_keys(plan: &RunPlan) -> (Vec<String>, Vec<String>) {
    let mut sql = Vec::new();
    let mut names = Vec::new();
    for fk in &plan.source.incoming {
        let name = quote_ident(&fk.name);
        sql.push(format!("ALTER TABLE {} DROP CONSTRAINT {name}", fk.table));
        sql.push(format!(
            "ALTER TABLE {} ADD CONSTRAINT {name} {} NOT VALID",
            fk.table, fk.definition
        ));
        if let Some(comment) = &fk.comment {
            sql.push(format!(
                "COMMENT ON CONSTRAINT {name} ON {} IS {}",
                fk.table,
                quote_literal(comment)
            ));
        }
        names.push(format!("{}.{name}", fk.table));
    }
    (sql, names)
}

/// For a plan recorded before the shadow carried every setting: publication
/// membership moves to the new table, and the replica identity index is set on it.
pub(super) fn publications_and_identity(plan: &RunPlan) -> Vec<String> {
    let names = plan.names();
    let mut sql = Vec::new();
    for publication in &plan.source.publications {
        sql.push(format!(
            "ALTER PUBLICATION {} DROP TABLE {}",
            quote_ident(publication),
            names.old(&plan.source.table.name)
        ));
        sql.push(format!(
            "ALTER PUBLICATION {} ADD TABLE {}",
            quote_ident(publication),
            plan.source.table.name
        ));
    }
    if let Some(index) = plan.indexes.iter().find(|i| i.replica_identity) {
        sql.push(format!(
            "ALTER TABLE {} REPLICA IDENTITY USING INDEX {}",
            plan.source.table.name,
            quote_ident(&index.source_name)
        ));
    }
    sql
}
