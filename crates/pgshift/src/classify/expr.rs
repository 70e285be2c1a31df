//! What pgshift needs to know of expressions: whether a default is volatile (which
//! forces a rewrite when a column is added), and which columns an expression reads.

use pgshift_sql::ast::Node;
use pgshift_sql::NodeEnum;

use super::names::strings;

/// Whether an expression can give a different value for each row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Volatility {
    /// Same value for every row of one statement (constants, `now()`).
    Stable,
    /// May differ per row (`random()`, `gen_random_uuid()`, `nextval()`).
    Volatile,
    /// Calls a function whose volatility is not known offline.
    Unknown,
}

/// Functions known to be volatile.
const VOLATILE_FUNCTIONS: &[&str] = &[
    "random",
    "random_normal",
    "gen_random_uuid",
    "uuidv4",
    "uuidv7",
    "uuid_generate_v1",
    "uuid_generate_v1mc",
    "uuid_generate_v4",
    "clock_timestamp",
    "timeofday",
    "nextval",
    "setval",
    "currval",
    "lastval",
    "txid_current",
    "pg_current_xact_id",
    "setseed",
];

/// Functions known to be immutable or stable (same value for every row of a
/// statement).
const STABLE_FUNCTIONS: &[&str] = &[
    "now",
    "statement_timestamp",
    "transaction_timestamp",
    "to_timestamp",
    "to_date",
    "date_trunc",
    "make_interval",
    "make_date",
    "make_timestamp",
    "make_timestamptz",
    "lower",
    "upper",
    "btrim",
    "ltrim",
    "rtrim",
    "concat",
    "concat_ws",
    "md5",
    "length",
    "substr",
    "substring",
    "replace",
    "abs",
    "to_jsonb",
    "to_json",
    "jsonb_build_object",
    "jsonb_build_array",
    "json_build_object",
    "json_build_array",
    "to_tsvector",
    "array_fill",
    "current_setting",
    "int4",
    "int8",
    "text",
    "numeric",
];

/// The volatility of an expression, from its syntax alone.
pub(crate) fn volatility(node: &Node) -> Volatility {
    let Some(inner) = &node.node else {
        return Volatility::Stable;
    };
    match inner {
        NodeEnum::AConst(_) | NodeEnum::SqlvalueFunction(_) | NodeEnum::ColumnRef(_) => {
            Volatility::Stable
        }
        NodeEnum::TypeCast(cast) => cast.arg.as_deref().map_or(Volatility::Stable, volatility),
        NodeEnum::FuncCall(call) => {
            let names = strings(&call.funcname);
            let name = names.last().map(String::as_str).unwrap_or("");
            let schema_ok = names.len() == 1 || names.first().is_some_and(|s| s == "pg_catalog");
            if VOLATILE_FUNCTIONS.contains(&name) {
                Volatility::Volatile
            } else if schema_ok && STABLE_FUNCTIONS.contains(&name) {
                combine(call.args.iter())
            // INV: CO-3 — a function of unknown volatility is not assumed stable.
            } else {
                Volatility::Unknown
            }
        }
        NodeEnum::AExpr(expr) => combine(expr.lexpr.iter().chain(expr.rexpr.iter()).map(|b| &**b)),
        NodeEnum::BoolExpr(expr) => combine(expr.args.iter()),
        NodeEnum::CoalesceExpr(expr) => combine(expr.args.iter()),
        NodeEnum::MinMaxExpr(expr) => combine(expr.args.iter()),
        NodeEnum::AArrayExpr(expr) => combine(expr.elements.iter()),
        NodeEnum::RowExpr(expr) => combine(expr.args.iter()),
        NodeEnum::NullTest(test) => test.arg.as_deref().map_or(Volatility::Stable, volatility),
        NodeEnum::CaseExpr(case) => {
            let mut parts: Vec<&Node> = case.args.iter().collect();
            parts.extend(case.arg.as_deref());
            parts.extend(case.defresult.as_deref());
            combine(parts.into_iter())
        }
        NodeEnum::CaseWhen(when) => {
            combine(when.expr.iter().chain(when.result.iter()).map(|b| &**b))
        }
        NodeEnum::List(list) => combine(list.items.iter()),
        _ => Volatility::Unknown,
    }
}

fn combine<'a>(nodes: impl Iterator<Item = &'a Node>) -> Volatility {
    let mut result = Volatility::Stable;
    for node in nodes {
        match volatility(node) {
            Volatility::Volatile => return Volatility::Volatile,
            Volatility::Unknown => result = Volatility::Unknown,
            Volatility::Stable => {}
        }
    }
    result
}

/// The distinct column names an expression references (the last part of each column
/// reference), in order of first appearance.
pub(crate) fn referenced_columns(node: &Node) -> Vec<String> {
    let mut found = Vec::new();
    collect_columns(node, &mut found);
    found
}

fn collect_columns(node: &Node, found: &mut Vec<String>) {
    walk(node, &mut |inner| {
        if let NodeEnum::ColumnRef(column) = inner {
            if let Some(name) = strings(&column.fields).last() {
                if !found.contains(name) {
                    found.push(name.clone());
                }
            }
        }
    });
}

/// Calls `visit` on every node of an expression, outermost first, through the
/// expression forms a default, a check, an index expression or a `USING` is made of.
pub(crate) fn walk(node: &Node, visit: &mut dyn FnMut(&NodeEnum)) {
    let Some(inner) = &node.node else { return };
    visit(inner);
    let mut children: Vec<&Node> = Vec::new();
    match inner {
        NodeEnum::AExpr(expr) => {
            children.extend(expr.lexpr.as_deref());
            children.extend(expr.rexpr.as_deref());
        }
        NodeEnum::BoolExpr(expr) => children.extend(&expr.args),
        NodeEnum::FuncCall(call) => children.extend(&call.args),
        NodeEnum::TypeCast(cast) => children.extend(cast.arg.as_deref()),
        NodeEnum::NullTest(test) => children.extend(test.arg.as_deref()),
        NodeEnum::CoalesceExpr(expr) => children.extend(&expr.args),
        NodeEnum::MinMaxExpr(expr) => children.extend(&expr.args),
        NodeEnum::AArrayExpr(expr) => children.extend(&expr.elements),
        NodeEnum::RowExpr(expr) => children.extend(&expr.args),
        NodeEnum::List(list) => children.extend(&list.items),
        NodeEnum::CaseExpr(case) => {
            children.extend(case.arg.as_deref());
            children.extend(&case.args);
            children.extend(case.defresult.as_deref());
        }
        NodeEnum::CaseWhen(when) => {
            children.extend(when.expr.as_deref());
            children.extend(when.result.as_deref());
        }
        NodeEnum::IndexElem(elem) => children.extend(elem.expr.as_deref()),
        NodeEnum::StatsElem(elem) => children.extend(elem.expr.as_deref()),
        NodeEnum::AIndirection(indirection) => children.extend(indirection.arg.as_deref()),
        NodeEnum::Constraint(constraint) => {
            children.extend(constraint.raw_expr.as_deref());
            children.extend(constraint.where_clause.as_deref());
        }
        NodeEnum::ColumnDef(def) => {
            children.extend(def.raw_default.as_deref());
            children.extend(&def.constraints);
        }
        _ => {}
    }
    for child in children {
        walk(child, visit);
    }
}

/// The expressions a DDL statement stores or evaluates: column defaults, checks,
/// generated columns, `USING`, index expressions and predicates, and statistics
/// expressions.
pub(crate) fn stored_expressions(statement: &NodeEnum) -> Vec<&Node> {
    let mut roots: Vec<&Node> = Vec::new();
    match statement {
        NodeEnum::AlterTableStmt(stmt) => {
            for cmd in &stmt.cmds {
                if let Some(NodeEnum::AlterTableCmd(cmd)) = &cmd.node {
                    roots.extend(cmd.def.as_deref());
                }
            }
        }
        NodeEnum::CreateStmt(stmt) => roots.extend(&stmt.table_elts),
        NodeEnum::IndexStmt(stmt) => {
            roots.extend(&stmt.index_params);
            roots.extend(stmt.where_clause.as_deref());
        }
        NodeEnum::CreateDomainStmt(stmt) => roots.extend(&stmt.constraints),
        NodeEnum::CreateStatsStmt(stmt) => roots.extend(&stmt.exprs),
        _ => {}
    }
    roots
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_of(sql: &str) -> Node {
        let stmts = pgshift_sql::parse(&format!("SELECT {sql}")).expect("parses");
        let NodeEnum::SelectStmt(select) = &stmts[0].node else {
            panic!("not a select")
        };
        let Some(NodeEnum::ResTarget(target)) = &select.target_list[0].node else {
            panic!("no target")
        };
        *target.val.clone().expect("value")
    }

    #[test]
    fn volatile_defaults_are_recognised() {
        assert_eq!(
            volatility(&default_of("gen_random_uuid()")),
            Volatility::Volatile
        );
        assert_eq!(volatility(&default_of("now()")), Volatility::Stable);
        assert_eq!(
            volatility(&default_of("CURRENT_TIMESTAMP")),
            Volatility::Stable
        );
        assert_eq!(volatility(&default_of("0")), Volatility::Stable);
        assert_eq!(volatility(&default_of("'{}'::jsonb")), Volatility::Stable);
        assert_eq!(
            volatility(&default_of("coalesce(1, (random() * 10)::int)")),
            Volatility::Volatile
        );
        assert_eq!(volatility(&default_of("my_func()")), Volatility::Unknown);
    }

    #[test]
    fn referenced_columns_are_distinct_and_ordered() {
        let expr = default_of("a > 0 AND (b IS NOT NULL OR a < 10)");
        assert_eq!(
            referenced_columns(&expr),
            vec!["a".to_owned(), "b".to_owned()]
        );
    }
}
