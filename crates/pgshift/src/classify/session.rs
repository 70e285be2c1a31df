//! Session and transaction statements: `SET`, `RESET`, `BEGIN`, `COMMIT`, ….

use pgshift_sql::ast::{
    a_const::Val, TransactionStmt, TransactionStmtKind, VariableSetKind, VariableSetStmt,
};
use pgshift_sql::NodeEnum;

use super::{Builder, Effect, OperationKind, WorkClass};
use crate::refusal::RefusalCause;

pub(crate) fn classify_set(stmt: &VariableSetStmt, b: &mut Builder) {
    let kind = VariableSetKind::try_from(stmt.kind).unwrap_or(VariableSetKind::Undefined);
    let reset = matches!(
        kind,
        VariableSetKind::VarReset | VariableSetKind::VarResetAll
    );
    b.statement(if reset { "reset" } else { "set" });
    b.operation(
        if reset {
            OperationKind::ResetSetting
        } else {
            OperationKind::SetSetting
        },
        None,
        Some(&stmt.name),
        WorkClass::None,
    )
    .detail = Some(if stmt.is_local { "LOCAL" } else { "SESSION" }.to_owned());
    if kind == VariableSetKind::VarResetAll {
        b.effect(Effect::ResetAll);
        return;
    }
    let value = if reset || kind == VariableSetKind::VarSetDefault {
        SetValue::Default
    } else {
        first_value(stmt)
    };
    let local = stmt.is_local;
    match stmt.name.as_str() {
        "lock_timeout" => b.effect(Effect::SetLockTimeout {
            millis: value.millis(),
            local,
        }),
        "statement_timeout" => b.effect(Effect::SetStatementTimeout {
            millis: value.millis(),
            local,
        }),
        "session_replication_role" => b.effect(Effect::SetReplicationRole {
            role: match value {
                SetValue::Text(text) => text.to_lowercase(),
                _ => "origin".to_owned(),
            },
            local,
        }),
        _ => {}
    }
}

/// The value of a `SET`, as far as pgshift needs it.
enum SetValue {
    /// `DEFAULT` or `RESET`.
    Default,
    /// A number without unit.
    Number(i64),
    /// A string (possibly with a unit, `'2s'`).
    Text(String),
    /// Anything else.
    Other,
}

impl SetValue {
    /// A duration setting in milliseconds (`0` disables it); `DEFAULT` counts as 0, the
    /// server's default for the timeouts.
    fn millis(&self) -> Option<u64> {
        match self {
            SetValue::Default => Some(0),
            SetValue::Number(n) => u64::try_from(*n).ok(),
            SetValue::Text(text) => parse_duration_ms(text),
            SetValue::Other => None,
        }
    }
}

fn first_value(stmt: &VariableSetStmt) -> SetValue {
    match stmt.args.first().and_then(|node| node.node.as_ref()) {
        Some(NodeEnum::AConst(constant)) => match &constant.val {
            Some(Val::Ival(i)) => SetValue::Number(i64::from(i.ival)),
            Some(Val::Sval(s)) => SetValue::Text(s.sval.clone()),
            Some(Val::Fval(f)) => f
                .fval
                .parse::<f64>()
                .map_or(SetValue::Other, |v| SetValue::Number(v as i64)),
            _ => SetValue::Other,
        },
        _ => SetValue::Other,
    }
}

/// Parses a PostgreSQL duration (`'2s'`, `'500ms'`, `'1min'`, `'0'`, `'3000'`) into
/// milliseconds, as the server would for a setting measured in milliseconds.
pub(crate) fn parse_duration_ms(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor = match unit.trim() {
        "" | "ms" => 1.0,
        "us" => 0.001,
        "s" => 1000.0,
        "min" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => 86_400_000.0,
        _ => return None,
    };
    let millis = (number * factor).round();
    (millis.is_finite() && millis >= 0.0).then_some(millis as u64)
}

pub(crate) fn classify_transaction(stmt: &TransactionStmt, b: &mut Builder) {
    use TransactionStmtKind as K;
    b.statement("transaction");
    b.transaction_control();
    let kind = K::try_from(stmt.kind).unwrap_or(K::Undefined);
    let (operation, effects): (OperationKind, &[Effect]) = match kind {
        K::TransStmtBegin | K::TransStmtStart => (OperationKind::Begin, &[Effect::Begin]),
        K::TransStmtCommit if stmt.chain => {
            (OperationKind::Commit, &[Effect::Commit, Effect::Begin])
        }
        K::TransStmtCommit => (OperationKind::Commit, &[Effect::Commit]),
        K::TransStmtRollback if stmt.chain => {
            (OperationKind::Rollback, &[Effect::Rollback, Effect::Begin])
        }
        K::TransStmtRollback => (OperationKind::Rollback, &[Effect::Rollback]),
        K::TransStmtSavepoint => (OperationKind::Savepoint, &[]),
        K::TransStmtRelease => (OperationKind::ReleaseSavepoint, &[]),
        K::TransStmtRollbackTo => (OperationKind::RollbackToSavepoint, &[]),
        K::TransStmtPrepare => (OperationKind::PrepareTransaction, &[]),
        K::TransStmtCommitPrepared => (OperationKind::CommitPrepared, &[]),
        K::TransStmtRollbackPrepared | K::Undefined => (OperationKind::RollbackPrepared, &[]),
    };
    b.operation(operation, None, None, WorkClass::None);
    for effect in effects {
        b.effect(effect.clone());
    }
    if matches!(
        kind,
        K::TransStmtPrepare | K::TransStmtCommitPrepared | K::TransStmtRollbackPrepared
    ) {
        b.refuse(
            RefusalCause::TwoPhaseCommit,
            "two-phase commit in a migration leaves locks held by a prepared transaction no session owns",
        );
    }
}

pub(crate) fn classify_discard(b: &mut Builder) {
    b.statement("discard");
    b.operation(OperationKind::ResetSetting, None, None, WorkClass::None);
    b.effect(Effect::ResetAll);
}

pub(crate) fn classify_show(b: &mut Builder) {
    b.statement("show");
    b.operation(OperationKind::Select, None, None, WorkClass::None);
}

#[cfg(test)]
mod tests {
    use super::parse_duration_ms;

    #[test]
    fn durations_parse_like_postgres() {
        assert_eq!(parse_duration_ms("2s"), Some(2000));
        assert_eq!(parse_duration_ms("500ms"), Some(500));
        assert_eq!(parse_duration_ms("1min"), Some(60_000));
        assert_eq!(parse_duration_ms("3000"), Some(3000));
        assert_eq!(parse_duration_ms("0"), Some(0));
        assert_eq!(parse_duration_ms("1.5s"), Some(1500));
        assert_eq!(parse_duration_ms("2 s"), Some(2000));
        assert_eq!(parse_duration_ms("two"), None);
        assert_eq!(parse_duration_ms("5 fortnights"), None);
    }
}
