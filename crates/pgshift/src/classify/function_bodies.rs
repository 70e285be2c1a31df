//! The relations function bodies lock.
//!
//! * **A call.** A statement that calls a function runs its body, which takes the
//!   locks its own statements take. For every call of a name that is not a built-in
//!   one ([`super::builtins`]): with live facts, the body of each function of that
//!   name written in SQL (plain or `BEGIN ATOMIC`) is classified like a statement of
//!   the input and its locks are the call's; without them (or for a name no function
//!   has yet), the call states [`Role::FunctionBodies`], open-ended, at ACCESS
//!   EXCLUSIVE (the function may be written in any language and run DDL). Bodies in
//!   other languages (PL/pgSQL, C) are not read: their locks are the procedural trace's
//!   to see (`plan` traces a statement calling a function on a clone). Calls are looked for
//!   in data statements, `CALL`, and the expressions a DDL statement evaluates or
//!   stores ([`super::expr::stored_expressions`]).
//! * **A definition.** `CREATE FUNCTION … LANGUAGE sql` parses and analyses its body
//!   (always for `BEGIN ATOMIC`, and for a quoted body with `check_function_bodies` on,
//!   as it is by default): ACCESS SHARE on what each data statement reads, ROW
//!   EXCLUSIVE on what it writes, and what the rewriter opens for rules and views.
//!   Nothing is executed, so indexes, partitions, triggers and foreign keys are not
//!   locked.
//!
//! A body calling further functions is followed [`MAX_DEPTH`] calls deep; past that
//! the call states the open-ended role.

use std::cell::Cell;

use pgshift_sql::ast::{CreateFunctionStmt, FuncCall};
use pgshift_sql::{NodeEnum, NodeRef, QualifiedName, Statement};

use super::builtins;
use super::dml::referenced_relations;
use super::names::{list_items, qualified_from_parts, strings};
use super::{classify, Builder, Classification, Context, ObjectKind};
use crate::lock::{LockMode, ObjectClass, ObjectRef, Role};

/// How many bodies deep calls are followed.
const MAX_DEPTH: u32 = 4;

thread_local! {
    /// The depth of body classification on this thread (classification is synchronous).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// The locks of the bodies of the functions `statement` calls.
pub(crate) fn called(statement: &Statement, context: &Context<'_>, b: &mut Builder) {
    for name in called_names(&statement.node) {
        let function = ObjectRef {
            class: ObjectClass::Function,
            name: name.clone(),
        };
        let live = context
            .facts
            .filter(|f| !f.is_declared())
            .and_then(|f| f.function(&name))
            .filter(|f| f.found);
        let depth = DEPTH.with(Cell::get);
        match live {
            Some(facts) if depth < MAX_DEPTH => {
                for definition in &facts.sql_definitions {
                    for body in body_statements(definition, statement) {
                        DEPTH.with(|d| d.set(depth + 1));
                        let classification = classify(&body, context);
                        DEPTH.with(|d| d.set(depth));
                        b.absorb_body(classification, &function, false);
                    }
                }
            }
            _ => b.related(
                context,
                Role::FunctionBodies,
                function,
                ObjectKind::Table,
                LockMode::AccessExclusive,
                true,
            ),
        }
    }
}

/// The locks `CREATE FUNCTION … LANGUAGE sql` takes analysing its body.
pub(crate) fn created(
    stmt: &CreateFunctionStmt,
    statement: &Statement,
    context: &Context<'_>,
    b: &mut Builder,
) {
    if !is_sql(stmt) {
        return;
    }
    let name = qualified_from_parts(&strings(&stmt.funcname), 0)
        .unwrap_or_else(|| QualifiedName::bare(""));
    let function = ObjectRef {
        class: ObjectClass::Function,
        name,
    };
    // A parameter's default is stored: a sequence or relation it names by a constant
    // is read (ACCESS SHARE), as for a column default.
    let defaults: Vec<&pgshift_sql::ast::Node> = stmt
        .parameters
        .iter()
        .filter_map(|p| match &p.node {
            Some(NodeEnum::FunctionParameter(param)) => param.defexpr.as_deref(),
            _ => None,
        })
        .collect();
    for (text, kind) in super::related_families::named_by_constant_in(&defaults) {
        let parts: Vec<String> = text.split('.').map(str::to_owned).collect();
        if let Some(relation) = qualified_from_parts(&parts, 0) {
            b.lock(&relation, kind, LockMode::AccessShare, false);
        }
    }
    for body in statements_of(stmt, statement) {
        if let NodeEnum::ReturnStmt(ret) = &body.node {
            // Analysed like a query: a view it reads is expanded, its bases read too.
            for read in ret
                .returnval
                .as_deref()
                .map(referenced_relations)
                .unwrap_or_default()
            {
                b.lock(&read, ObjectKind::Table, LockMode::AccessShare, false);
                b.related(
                    context,
                    Role::ViewBaseRelations,
                    ObjectRef::relation(&read),
                    ObjectKind::Table,
                    LockMode::AccessShare,
                    false,
                );
            }
            continue;
        }
        if !pgshift_sql::is_data_statement(&body.node) {
            continue;
        }
        let depth = DEPTH.with(Cell::get);
        DEPTH.with(|d| d.set(MAX_DEPTH));
        let classification = classify(&body, context);
        DEPTH.with(|d| d.set(depth));
        b.absorb_body(classification, &function, true);
    }
}

/// The names of the functions a statement calls that are not built in.
fn called_names(node: &NodeEnum) -> Vec<QualifiedName> {
    let mut calls: Vec<Vec<String>> = Vec::new();
    match node {
        NodeEnum::SelectStmt(_)
        | NodeEnum::InsertStmt(_)
        | NodeEnum::UpdateStmt(_)
        | NodeEnum::DeleteStmt(_)
        | NodeEnum::MergeStmt(_)
        | NodeEnum::CopyStmt(_)
        | NodeEnum::CreateTableAsStmt(_) => {
            for (inner, _, _, _) in node.nodes() {
                if let NodeRef::FuncCall(call) = inner {
                    calls.push(strings(&call.funcname));
                }
            }
        }
        NodeEnum::CallStmt(stmt) => calls.extend(
            stmt.funccall
                .as_deref()
                .map(|call: &FuncCall| strings(&call.funcname)),
        ),
        _ => {
            for root in super::expr::stored_expressions(node) {
                super::expr::walk(root, &mut |inner| {
                    if let NodeEnum::FuncCall(call) = inner {
                        calls.push(strings(&call.funcname));
                    }
                });
            }
        }
    }
    let mut names: Vec<QualifiedName> = Vec::new();
    for parts in calls {
        let Some(name) = qualified_from_parts(&parts, 0) else {
            continue;
        };
        let built_in = match name.schema.as_deref() {
            Some(schema) => schema == "pg_catalog",
            None => builtins::is_function(&name.name),
        };
        if !built_in && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// The statements of the body of the function `definition` creates
/// (`pg_get_functiondef`'s text), located at `at` for messages.
fn body_statements(definition: &str, at: &Statement) -> Vec<Statement> {
    let Ok(parsed) = pgshift_sql::parse(definition) else {
        return Vec::new();
    };
    parsed
        .iter()
        .filter_map(|s| match &s.node {
            NodeEnum::CreateFunctionStmt(stmt) => Some(statements_of(stmt, at)),
            _ => None,
        })
        .flatten()
        .collect()
}

/// Whether a function is written in SQL (`LANGUAGE sql`, or a `BEGIN ATOMIC`/`RETURN`
/// body, which only SQL has).
fn is_sql(stmt: &CreateFunctionStmt) -> bool {
    stmt.sql_body.is_some()
        || stmt.options.iter().any(|option| match &option.node {
            Some(NodeEnum::DefElem(def)) if def.defname == "language" => {
                match def.arg.as_deref().and_then(|a| a.node.as_ref()) {
                    Some(NodeEnum::String(s)) => s.sval.eq_ignore_ascii_case("sql"),
                    _ => false,
                }
            }
            _ => false,
        })
}

/// The statements of a SQL function's body: the `BEGIN ATOMIC` list or `RETURN`, or
/// the quoted body parsed. A body that does not parse has none.
fn statements_of(stmt: &CreateFunctionStmt, at: &Statement) -> Vec<Statement> {
    let wrap = |node: NodeEnum| Statement {
        index: at.index,
        span: at.span,
        position: at.position,
        text: at.text.clone(),
        leading_comments: Vec::new(),
        node,
    };
    if let Some(body) = stmt.sql_body.as_deref() {
        let mut found = Vec::new();
        collect_body(body, &mut |node| found.push(wrap(node.clone())));
        return found;
    }
    let quoted = stmt.options.iter().find_map(|option| match &option.node {
        Some(NodeEnum::DefElem(def)) if def.defname == "as" => def
            .arg
            .as_deref()
            .and_then(|arg| strings(list_items(arg)).into_iter().next()),
        _ => None,
    });
    quoted
        .and_then(|text| pgshift_sql::parse(&text).ok())
        .unwrap_or_default()
        .into_iter()
        .map(|s| wrap(s.node))
        .collect()
}

/// The statements of a `BEGIN ATOMIC` body (a list of lists) or a `RETURN`.
fn collect_body(node: &pgshift_sql::ast::Node, found: &mut dyn FnMut(&NodeEnum)) {
    match &node.node {
        Some(NodeEnum::List(list)) => {
            for item in &list.items {
                collect_body(item, found);
            }
        }
        Some(other) => found(other),
        None => {}
    }
}

impl Builder {
    /// Takes in the locks of a function body's statement, as related to `function`:
    /// all of them for a call; for a definition, only what analysing it opens (the
    /// relations named, at most ROW EXCLUSIVE, and what rules and views reach).
    fn absorb_body(&mut self, body: Classification, function: &ObjectRef, definition: bool) {
        let related_to = super::RelatedTo {
            role: Role::FunctionBodies,
            of: function.clone(),
        };
        for mut lock in body.locks {
            if definition {
                lock.mode = lock.mode.min(LockMode::RowExclusive);
                lock.recurses = false;
                lock.partition_mode = None;
                lock.index_mode = None;
            }
            lock.related_to.get_or_insert_with(|| related_to.clone());
            self.locks.push(lock);
        }
        for mut related in body.related_locks {
            if definition {
                if !matches!(
                    related.related_to.role,
                    Role::RuleRelations | Role::ViewBaseRelations
                ) {
                    continue;
                }
                related.mode = related.mode.min(LockMode::RowExclusive);
                related.recurses = false;
            }
            match self
                .related_locks
                .iter_mut()
                .find(|l| l.related_to == related.related_to)
            {
                Some(existing) => {
                    existing.mode = existing.mode.max(related.mode);
                    existing.recurses |= related.recurses;
                }
                None => self.related_locks.push(related),
            }
        }
    }
}
