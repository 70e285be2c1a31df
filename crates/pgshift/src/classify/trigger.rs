//! Triggers and the functions they call: `CREATE [CONSTRAINT] TRIGGER`,
//! `DROP TRIGGER`, `CREATE [OR REPLACE] FUNCTION`.

use pgshift_sql::ast::{CreateFunctionStmt, CreateTrigStmt, DropStmt};
use pgshift_sql::QualifiedName;

use super::names::{list_items, qualified_from_parts, range_var_name, strings};
use super::{Builder, Context, Effect, ObjectKind, OperationKind, WorkClass};
use crate::catalog::Lookup;
use crate::lock::LockMode;
use crate::refusal::RefusalCause;

/// `TRIGGER_TYPE_ROW` and `TRIGGER_TYPE_BEFORE` bits of `CreateTrigStmt.timing`/`row`.
const TRIGGER_TYPE_BEFORE: i32 = 1 << 1;

pub(crate) fn classify_create(stmt: &CreateTrigStmt, context: &Context<'_>, b: &mut Builder) {
    b.statement("create-trigger");
    let Some(relation) = &stmt.relation else {
        b.refuse(
            RefusalCause::UnclassifiedStatement,
            "CREATE TRIGGER without a table",
        );
        return;
    };
    let table = range_var_name(relation);
    if let Lookup::Missing = context.lookup(&table) {
        if !context.is_new(&table) {
            b.refuse(
                RefusalCause::TableMissing,
                format!("table {table} does not exist in the search path"),
            );
        }
    }
    b.lock(
        &table,
        ObjectKind::Table,
        LockMode::ShareRowExclusive,
        relation.inh,
    );
    // A constraint trigger's `FROM` table is opened to record it (ACCESS SHARE).
    if let Some(from) = stmt.constrrel.as_ref().filter(|_| stmt.isconstraint) {
        b.lock(
            &range_var_name(from),
            ObjectKind::Table,
            LockMode::AccessShare,
            false,
        );
    }
    let kind = if stmt.replace {
        OperationKind::ReplaceTrigger
    } else if stmt.isconstraint {
        OperationKind::CreateConstraintTrigger
    } else {
        OperationKind::CreateTrigger
    };
    b.operation(
        kind,
        Some(&table),
        Some(&stmt.trigname),
        WorkClass::CatalogOnly,
    );
    b.reason("CREATE TRIGGER takes SHARE ROW EXCLUSIVE on the table (and every partition): writes wait while it waits for and holds the lock");
    b.reason("a new trigger is ORIGIN-enabled: sessions with session_replication_role = replica skip it; ALTER TABLE … ENABLE ALWAYS TRIGGER makes it fire for them too");
    if stmt.replace {
        b.reason("CREATE OR REPLACE TRIGGER resets the trigger's enable state to ORIGIN");
    }
    let function = qualified_from_parts(&strings(&stmt.funcname), 0)
        .unwrap_or_else(|| QualifiedName::bare(""));
    b.effect(Effect::CreatesTrigger {
        table,
        name: stmt.trigname.clone(),
        function,
        is_constraint: stmt.isconstraint,
        before_row: stmt.row && stmt.timing & TRIGGER_TYPE_BEFORE != 0,
    });
}

/// `DROP TRIGGER [IF EXISTS] name ON table`.
pub(crate) fn classify_drop(stmt: &DropStmt, b: &mut Builder) {
    b.statement("drop-trigger");
    for node in &stmt.objects {
        let parts = strings(list_items(node));
        let trigger = parts.last().cloned().unwrap_or_default();
        let Some(table) = qualified_from_parts(&parts, 1) else {
            continue;
        };
        b.lock(&table, ObjectKind::Table, LockMode::AccessExclusive, true);
        b.operation(
            OperationKind::DropTrigger,
            Some(&table),
            Some(&trigger),
            WorkClass::CatalogOnly,
        );
    }
    b.reason("DROP TRIGGER takes ACCESS EXCLUSIVE on the table (and every partition): reads and writes wait while it waits for and holds the lock");
}

pub(crate) fn classify_function(stmt: &CreateFunctionStmt, b: &mut Builder) {
    b.statement(if stmt.is_procedure {
        "create-procedure"
    } else {
        "create-function"
    });
    let name = qualified_from_parts(&strings(&stmt.funcname), 0)
        .unwrap_or_else(|| QualifiedName::bare(""));
    let returns_trigger = stmt
        .return_type
        .as_ref()
        .is_some_and(|t| strings(&t.names).last().is_some_and(|n| n == "trigger"));
    let body = function_body(stmt);
    b.operation(
        OperationKind::CreateFunction,
        None,
        Some(&name.name),
        WorkClass::CatalogOnly,
    );
    if stmt.replace && returns_trigger {
        b.reason("replacing a trigger function changes the behaviour of every trigger that calls it as soon as this commits");
    }
    b.effect(Effect::DefinesFunction {
        name,
        returns_trigger,
        raises: body.as_deref().is_some_and(body_raises),
        replaces: stmt.replace,
    });
}

fn function_body(stmt: &CreateFunctionStmt) -> Option<String> {
    stmt.options.iter().find_map(|node| match &node.node {
        Some(pgshift_sql::NodeEnum::DefElem(def)) if def.defname == "as" => def
            .arg
            .as_deref()
            .map(|arg| strings(list_items(arg)).join("\n")),
        _ => None,
    })
}

/// Whether a function body raises an error (`RAISE EXCEPTION`, `RAISE 'msg'`,
/// `RAISE SQLSTATE`, `RAISE some_condition`): a sign that the trigger guards an
/// invariant. `RAISE NOTICE/WARNING/INFO/LOG/DEBUG` do not count.
pub(crate) fn body_raises(body: &str) -> bool {
    let lower = body.to_lowercase();
    let mut rest = lower.as_str();
    while let Some(at) = rest.find("raise") {
        let before_ok = at == 0
            || !rest[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_');
        let after = &rest[at + 5..];
        let next_word: String = after
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '\'')
            .collect();
        let starts_with_space = after.starts_with(char::is_whitespace) || after.starts_with(';');
        if before_ok
            && starts_with_space
            && !matches!(
                next_word.as_str(),
                "notice" | "warning" | "info" | "log" | "debug"
            )
        {
            return true;
        }
        rest = after;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::body_raises;

    #[test]
    fn raise_levels_are_told_apart() {
        assert!(body_raises(
            "BEGIN IF x THEN RAISE EXCEPTION 'no'; END IF; END"
        ));
        assert!(body_raises("begin raise 'bad %', x; end"));
        assert!(body_raises("BEGIN RAISE check_violation; END"));
        assert!(body_raises("BEGIN RAISE SQLSTATE '23514'; END"));
        assert!(!body_raises(
            "BEGIN RAISE NOTICE 'hi'; RAISE WARNING 'x'; END"
        ));
        assert!(!body_raises("BEGIN PERFORM praise(); END"));
        assert!(!body_raises("SELECT 1"));
    }
}
