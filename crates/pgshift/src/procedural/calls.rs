//! Top-level function and procedure calls, and the functions a traced statement
//! called: what PC-2 asks of them before a call is expanded into the statements its
//! functions executed.

use pgshift_sql::ast::{FuncCall, Node};
use pgshift_sql::{NodeEnum, Statement};

use crate::trace::StatementTrace;

/// Whether the statement is a `SELECT f(…), …` (no `FROM`, `WHERE`, `INTO` or other
/// clause, each output a call) or a `CALL p(…)` whose arguments are all constants:
/// its result is not used, so it can run as the statements its functions executed.
/// `Err` says why not.
pub(crate) fn constant_call(statement: &Statement) -> Result<(), String> {
    let not = |why: &str| Err(format!("it is not a DO block in PL/pgSQL, and {why}"));
    match &statement.node {
        NodeEnum::CallStmt(call) => match call.funccall.as_deref() {
            Some(call) if constant_arguments(call) => Ok(()),
            _ => not("its CALL's arguments are not all constants"),
        },
        NodeEnum::SelectStmt(select) => {
            let bare = select.from_clause.is_empty()
                && select.where_clause.is_none()
                && select.into_clause.is_none()
                && select.with_clause.is_none()
                && select.group_clause.is_empty()
                && select.having_clause.is_none()
                && select.distinct_clause.is_empty()
                && select.sort_clause.is_empty()
                && select.limit_count.is_none()
                && select.limit_offset.is_none()
                && select.locking_clause.is_empty()
                && select.values_lists.is_empty()
                && select.larg.is_none()
                && !select.target_list.is_empty();
            if !bare {
                return not("its SELECT has clauses besides function calls");
            }
            let calls = select.target_list.iter().all(|target| {
                let Some(NodeEnum::ResTarget(target)) = &target.node else {
                    return false;
                };
                match target.val.as_deref().and_then(|v| v.node.as_ref()) {
                    Some(NodeEnum::FuncCall(call)) => {
                        call.over.is_none()
                            && call.agg_filter.is_none()
                            && !call.agg_star
                            && constant_arguments(call)
                    }
                    _ => false,
                }
            });
            if calls {
                Ok(())
            } else {
                not("its SELECT outputs something other than calls with constant arguments")
            }
        }
        _ => not("it is not a SELECT or CALL of functions with constant arguments"),
    }
}

fn constant_arguments(call: &FuncCall) -> bool {
    call.args.iter().all(constant)
}

fn constant(node: &Node) -> bool {
    match &node.node {
        Some(NodeEnum::AConst(_)) => true,
        Some(NodeEnum::TypeCast(cast)) => cast.arg.as_deref().is_some_and(constant),
        Some(NodeEnum::NamedArgExpr(named)) => named.arg.as_deref().is_some_and(constant),
        _ => false,
    }
}

/// Why the statements of the functions the statement called were not all logged, when
/// they were not (PC-2 asks that they were).
pub(crate) fn functions_not_logged(trace: &StatementTrace) -> Option<String> {
    let Some(functions) = &trace.functions else {
        return Some(
            "the functions it called were not read (it ran outside a transaction block)".to_owned(),
        );
    };
    functions.iter().find_map(|function| {
        function.not_logged.as_ref().map(|why| {
            format!(
                "it called {}({}), whose statements are not logged: {why}",
                function.name, function.arguments
            )
        })
    })
}

/// The queries and expressions of the bodies of the functions it called.
pub(crate) fn function_queries(trace: &StatementTrace) -> Vec<String> {
    trace
        .functions
        .iter()
        .flatten()
        .flat_map(|function| function.queries.iter().cloned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(sql: &str) -> Result<(), String> {
        let statements = pgshift_sql::parse(sql).expect("parses");
        constant_call(&statements[0])
    }

    #[test]
    fn calls_with_constant_arguments_are_expandable_and_others_are_not() {
        assert!(judged("SELECT f('channels')").is_ok());
        assert!(judged("SELECT f('a'::regclass), g(1, tbl => 'x')").is_ok());
        assert!(judged("CALL p('a', 2)").is_ok());
        assert!(judged("SELECT f(now())").is_err());
        assert!(judged("SELECT f('a') WHERE true").is_err());
        assert!(judged("SELECT f(relname) FROM pg_class").is_err());
        assert!(judged("SELECT f('a') INTO t").is_err());
        assert!(judged("SELECT 1 + f('a')").is_err());
        assert!(judged("CALL p(q())").is_err());
    }
}
