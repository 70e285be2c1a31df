//! Related-relation locks of the catalog statements of `misc`: rules, policies,
//! domains and publications (see `families` for the rest).

use pgshift_sql::ast::{
    AlterDomainStmt, AlterPublicationAction, AlterPublicationStmt, Node, RuleStmt,
};
use pgshift_sql::{NodeEnum, NodeRef, QualifiedName};

use super::dml::referenced_relations;
use super::names::{qualified_from_parts, range_var_name, strings};
use super::{Builder, Context, ObjectKind};
use crate::catalog::Lookup;
use crate::lock::{LockMode, ObjectClass, ObjectRef, Role};

/// `CREATE [OR REPLACE] RULE`: ACCESS EXCLUSIVE on its table; its actions are planned,
/// which locks the relations they write in ROW EXCLUSIVE and those they read in ACCESS
/// SHARE.
pub(crate) fn rule(stmt: &RuleStmt, context: &Context<'_>, b: &mut Builder) {
    let _ = context;
    let Some(relation) = &stmt.relation else {
        return;
    };
    b.lock(
        &range_var_name(relation),
        ObjectKind::Table,
        LockMode::AccessExclusive,
        false,
    );
    let mut written: Vec<QualifiedName> = Vec::new();
    for action in &stmt.actions {
        if let Some(node) = &action.node {
            for (inner, _, _, _) in node.nodes() {
                let target = match inner {
                    NodeRef::InsertStmt(s) => s.relation.as_ref(),
                    NodeRef::UpdateStmt(s) => s.relation.as_ref(),
                    NodeRef::DeleteStmt(s) => s.relation.as_ref(),
                    _ => None,
                };
                if let Some(target) = target {
                    let name = range_var_name(target);
                    b.lock(&name, ObjectKind::Table, LockMode::RowExclusive, false);
                    written.push(name);
                }
            }
        }
        for read in referenced_relations(action) {
            if !written.contains(&read) {
                b.lock(&read, ObjectKind::Table, LockMode::AccessShare, false);
            }
        }
    }
    if let Some(clause) = &stmt.where_clause {
        for read in referenced_relations(clause) {
            b.lock(&read, ObjectKind::Table, LockMode::AccessShare, false);
        }
    }
}

/// `CREATE/ALTER POLICY … USING (…) WITH CHECK (…)`: the relations its expressions
/// read are opened (ACCESS SHARE) to analyse them.
pub(crate) fn policy_expressions(expressions: &[&Option<Box<Node>>], b: &mut Builder) {
    for expression in expressions.iter().filter_map(|e| e.as_deref()) {
        for read in referenced_relations(expression) {
            b.lock(&read, ObjectKind::Table, LockMode::AccessShare, false);
        }
    }
}

/// `ALTER DOMAIN`: adding or validating a constraint, or `SET NOT NULL`, checks every
/// column of the domain under SHARE on each table using it.
pub(crate) fn alter_domain(stmt: &AlterDomainStmt, context: &Context<'_>, b: &mut Builder) {
    let Some(name) = qualified_from_parts(&strings(&stmt.type_name), 0) else {
        return;
    };
    if !matches!(stmt.subtype.as_str(), "C" | "O" | "V") {
        return;
    }
    b.related(
        context,
        Role::TablesOfType,
        ObjectRef {
            class: ObjectClass::Type,
            name,
        },
        ObjectKind::Table,
        LockMode::Share,
        true,
    );
}

/// `ALTER PUBLICATION … SET TABLE`: the tables it stops publishing are locked like the
/// ones it adds.
pub(crate) fn alter_publication(
    stmt: &AlterPublicationStmt,
    context: &Context<'_>,
    b: &mut Builder,
) {
    let replaces =
        stmt.action == AlterPublicationAction::ApSetObjects as i32 && !stmt.pubobjects.is_empty();
    if !replaces {
        return;
    }
    b.related(
        context,
        Role::PublicationTables,
        ObjectRef {
            class: ObjectClass::Publication,
            name: QualifiedName::bare(stmt.pubname.clone()),
        },
        ObjectKind::Table,
        LockMode::ShareUpdateExclusive,
        false,
    );
}

/// `OWNED BY table.column` in a sequence's options: the table is read (ACCESS SHARE).
pub(crate) fn owned_by(options: &[Node], b: &mut Builder) {
    for option in options {
        if let Some(NodeEnum::DefElem(def)) = &option.node {
            if def.defname != "owned_by" {
                continue;
            }
            let parts = def
                .arg
                .as_deref()
                .map(|arg| strings(super::names::list_items(arg)))
                .unwrap_or_default();
            if let Some(table) = qualified_from_parts(&parts, 1) {
                b.lock(&table, ObjectKind::Table, LockMode::AccessShare, false);
            }
        }
    }
}

/// Sequence functions called with a constant name (`nextval('s')`, `setval`,
/// `currval`, `lastval` aside): ROW EXCLUSIVE on the sequence (ACCESS SHARE for
/// `currval`).
pub(crate) fn sequence_calls(node: &NodeEnum, b: &mut Builder) {
    for (inner, _, _, _) in node.nodes() {
        if let NodeRef::FuncCall(call) = inner {
            sequence_call(call, b);
        }
    }
}

/// One call of [`sequence_calls`].
fn sequence_call(call: &pgshift_sql::ast::FuncCall, b: &mut Builder) {
    let name = strings(&call.funcname);
    let mode = match name.last().map(String::as_str) {
        Some("nextval" | "setval") => LockMode::RowExclusive,
        Some("currval") => LockMode::AccessShare,
        _ => return,
    };
    let Some(text) = call.args.first().and_then(constant_argument) else {
        return;
    };
    let parts: Vec<String> = text.split('.').map(str::to_owned).collect();
    if let Some(sequence) = qualified_from_parts(&parts, 0) {
        b.lock(&sequence, ObjectKind::Sequence, mode, false);
    }
}

/// Relations a stored expression names by constant (`nextval('s')`, `currval`, `setval`,
/// `'t'::regclass`): PostgreSQL 18, and 15 from a minor release (seen on 15.20, not on
/// 15.18 or 14.23), locks each in ACCESS SHARE when it records the expression's
/// dependencies (seen for a column default, `SET DEFAULT`, `CREATE TABLE` and
/// `ADD COLUMN`). Minor releases can bring it, so it is stated on every version.
/// Statements that store none have nothing here.
pub(crate) fn stored_references(node: &NodeEnum, b: &mut Builder) {
    for (text, kind) in named_by_constant(node) {
        let parts: Vec<String> = text.split('.').map(str::to_owned).collect();
        if let Some(relation) = qualified_from_parts(&parts, 0) {
            b.lock(&relation, kind, LockMode::AccessShare, false);
        }
    }
}

/// Casts to a relation's row type in the expressions a DDL statement stores
/// (`((x, y)::pair).a` in an index, a statistics object or a generated column): the
/// relation is opened in ACCESS SHARE while the expression is analysed (seen on 15 and
/// 18). Offline every cast to a type that is not built in is stated; with live facts,
/// only those to a relation's row type.
pub(crate) fn row_type_casts(node: &NodeEnum, context: &Context<'_>, b: &mut Builder) {
    let live = context.facts.is_some_and(|f| !f.is_declared());
    for root in super::expr::stored_expressions(node) {
        super::expr::walk(root, &mut |inner| {
            let NodeEnum::TypeCast(cast) = inner else {
                return;
            };
            let Some(type_name) = &cast.type_name else {
                return;
            };
            let Some(name) = qualified_from_parts(&strings(&type_name.names), 0) else {
                return;
            };
            let built_in = match name.schema.as_deref() {
                Some(schema) => schema == "pg_catalog",
                None => super::builtins::is_type(&name.name),
            };
            let not_a_relation = live && matches!(context.lookup(&name), Lookup::Missing);
            if !built_in && !not_a_relation {
                b.lock(&name, ObjectKind::Table, LockMode::AccessShare, false);
            }
        });
    }
}

/// A DDL statement's sequence calls with a constant name, in the expressions it
/// evaluates for every row (a rewrite's volatile default, `USING`): locked as a data
/// statement locks them ([`sequence_calls`]).
pub(crate) fn evaluated_sequence_calls(node: &NodeEnum, b: &mut Builder) {
    // `SET DEFAULT` only stores its expression: nothing is evaluated.
    if let NodeEnum::AlterTableStmt(stmt) = node {
        let stores_only = stmt.cmds.iter().all(|cmd| {
            matches!(&cmd.node, Some(NodeEnum::AlterTableCmd(cmd))
                if cmd.subtype == pgshift_sql::ast::AlterTableType::AtColumnDefault as i32)
        });
        if stores_only {
            return;
        }
    }
    for root in super::expr::stored_expressions(node) {
        super::expr::walk(root, &mut |inner| {
            if let NodeEnum::FuncCall(call) = inner {
                sequence_call(call, b);
            }
        });
    }
}

/// The relations a statement's stored expressions name by a constant: the sequence of
/// `nextval('s')`, `currval`, `setval`, and the relation of `'t'::regclass`.
fn named_by_constant(node: &NodeEnum) -> Vec<(String, ObjectKind)> {
    named_by_constant_in(&super::expr::stored_expressions(node))
}

/// The relations `roots` name by a constant (see [`named_by_constant`]).
pub(crate) fn named_by_constant_in(roots: &[&Node]) -> Vec<(String, ObjectKind)> {
    let mut found = Vec::new();
    for &root in roots {
        super::expr::walk(root, &mut |inner| match inner {
            NodeEnum::FuncCall(call) => {
                let name = strings(&call.funcname);
                if matches!(
                    name.last().map(String::as_str),
                    Some("nextval" | "currval" | "setval")
                ) {
                    if let Some(text) = call.args.first().and_then(constant_argument) {
                        found.push((text, ObjectKind::Sequence));
                    }
                }
            }
            NodeEnum::TypeCast(cast) => {
                let to_regclass = cast.type_name.as_ref().is_some_and(|t| {
                    strings(&t.names).last().map(String::as_str) == Some("regclass")
                });
                if let (true, Some(Some(NodeEnum::AConst(constant)))) =
                    (to_regclass, cast.arg.as_deref().map(|a| &a.node))
                {
                    if let Some(text) = constant_text(constant) {
                        found.push((text, ObjectKind::Table));
                    }
                }
            }
            _ => {}
        });
    }
    found
}

/// A function's argument when it is a string constant, cast or not (`'s'`,
/// `'s'::regclass`).
fn constant_argument(arg: &pgshift_sql::ast::Node) -> Option<String> {
    match &arg.node {
        Some(NodeEnum::AConst(constant)) => constant_text(constant),
        Some(NodeEnum::TypeCast(cast)) => match cast.arg.as_deref().and_then(|a| a.node.as_ref()) {
            Some(NodeEnum::AConst(constant)) => constant_text(constant),
            _ => None,
        },
        _ => None,
    }
}

fn constant_text(constant: &pgshift_sql::ast::AConst) -> Option<String> {
    match &constant.val {
        Some(pgshift_sql::ast::a_const::Val::Sval(text)) => Some(text.sval.clone()),
        _ => None,
    }
}

/// Whether the server is at least `version_num`, or unknown (then the statement is
/// judged as the newest server would run it, where locks were only added).
pub(crate) fn since(context: &Context<'_>, version_num: i32) -> bool {
    context
        .server_version_num()
        .is_none_or(|v| v >= version_num)
}

/// `ALTER POLICY` may re-read the policy's expressions even when it only changes its
/// roles (seen on PostgreSQL 16 and later, and on 15 when the table's cache entry is
/// rebuilt): ACCESS SHARE on the relations they read, on every version.
pub(crate) fn altered_policy(context: &Context<'_>, table: &QualifiedName, b: &mut Builder) {
    {
        b.related(
            context,
            Role::PolicyRelations,
            ObjectRef::relation(table),
            ObjectKind::Table,
            LockMode::AccessShare,
            false,
        );
    }
}
