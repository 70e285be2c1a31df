//! The PL/pgSQL body of a `DO` block, read with PostgreSQL's own PL/pgSQL compiler
//! (libpg_query's `parse_plpgsql`), and an instrumented copy of the block that logs
//! every DDL statement it executes, in order and as exact text, before executing it.
//!
//! What [`DoBlock::of`] gives:
//! - the **sites**: each `EXECUTE expr` (its string is only known when it runs) and
//!   each static statement of the body that is not a query (DDL written in the body,
//!   which is its own exact text);
//! - the **queries**: every other SQL expression and query of the body (conditions,
//!   `SELECT … INTO`, loops over queries, `PERFORM`, assignments, the expressions of
//!   `EXECUTE`), as statements to parse, so that the caller can tell whether the
//!   block's control flow reads user tables or only the catalog;
//! - **opaque** constructs, whose statements cannot be logged (`FOR … IN EXECUTE`,
//!   `EXECUTE … USING`, `COMMIT` in a block, a cursor opened on a dynamic query); a
//!   `CALL` is not one: the procedure it calls is instrumented on its own.
//!
//! A function's or procedure's body is read the same way from its `CREATE FUNCTION`
//! statement ([`DoBlock::of_function`], as `pg_get_functiondef` gives it), and
//! [`DoBlock::instrument_function`] gives the same definition with only the body
//! edited.
//!
//! [`DoBlock::instrument`] edits the body only at the sites the compiler located (a
//! site's text is found again from its line), never by splitting SQL on `;`.

use pg_query::NodeEnum;
use serde_json::Value;

use crate::ident::quote_literal;
use crate::parse::{parse, Statement};

/// Why a `DO` block cannot be read or instrumented.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PlpgsqlError(pub String);

/// Where the block executes a statement pgshift logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Site {
    /// `EXECUTE expr`: the expression's text, on the statement's line.
    Dynamic { line: usize, expr: String },
    /// A statement written in the body that is not a query (DDL).
    Static { line: usize, sql: String },
}

/// A `DO` block in `LANGUAGE plpgsql`, read by PostgreSQL's PL/pgSQL compiler.
#[derive(Clone, Debug)]
pub struct DoBlock {
    pub(crate) body: String,
    pub(crate) sites: Vec<Site>,
    /// Static data-changing statements of the body (`INSERT`, `UPDATE`, `DELETE`,
    /// `MERGE`), which the guard reports too ([`crate::plpgsql_guard`]).
    pub(crate) writes: Vec<Site>,
    /// How many exception handlers (`WHEN … THEN`) the body has.
    pub(crate) handlers: usize,
    /// Every query and expression of the body other than its DDL, as SQL statements.
    pub queries: Vec<String>,
    /// Constructs whose statements cannot be logged, by name (empty when every
    /// statement the block executes is logged by [`DoBlock::instrument`]).
    pub opaque: Vec<&'static str>,
}

impl DoBlock {
    /// Reads `statement`, which must be a `DO` block in PL/pgSQL.
    pub fn of(statement: &Statement) -> Result<Self, PlpgsqlError> {
        let NodeEnum::DoStmt(stmt) = &statement.node else {
            return Err(PlpgsqlError("not a DO block".to_owned()));
        };
        let mut body = None;
        for arg in &stmt.args {
            let Some(NodeEnum::DefElem(def)) = &arg.node else {
                continue;
            };
            let value = match def.arg.as_ref().and_then(|a| a.node.as_ref()) {
                Some(NodeEnum::String(s)) => s.sval.clone(),
                _ => continue,
            };
            match def.defname.as_str() {
                "as" => body = Some(value),
                "language" if value != "plpgsql" => {
                    return Err(PlpgsqlError(format!(
                        "the block is in LANGUAGE {value}; only PL/pgSQL is read"
                    )))
                }
                _ => {}
            }
        }
        let body = body.ok_or_else(|| PlpgsqlError("the DO block has no body".to_owned()))?;
        Self::compiled(body, &statement.text)
    }

    /// Reads a `CREATE FUNCTION` or `CREATE PROCEDURE` statement in PL/pgSQL (as
    /// `pg_get_functiondef` gives it): its body, as a `DO` block's.
    pub fn of_function(definition: &str) -> Result<Self, PlpgsqlError> {
        let statements =
            parse(definition).map_err(|err| PlpgsqlError(format!("the definition: {err}")))?;
        let [statement] = statements.as_slice() else {
            return Err(PlpgsqlError(
                "the definition is not one statement".to_owned(),
            ));
        };
        let NodeEnum::CreateFunctionStmt(stmt) = &statement.node else {
            return Err(PlpgsqlError("not a CREATE FUNCTION statement".to_owned()));
        };
        let mut body = None;
        for option in &stmt.options {
            let Some(NodeEnum::DefElem(def)) = &option.node else {
                continue;
            };
            let arg = def.arg.as_ref().and_then(|a| a.node.as_ref());
            match (def.defname.as_str(), arg) {
                ("as", Some(NodeEnum::List(list))) => {
                    if let [item] = list.items.as_slice() {
                        if let Some(NodeEnum::String(s)) = &item.node {
                            body = Some(s.sval.clone());
                        }
                    }
                }
                ("language", Some(NodeEnum::String(s))) if s.sval != "plpgsql" => {
                    return Err(PlpgsqlError(format!(
                        "it is in LANGUAGE {}; only PL/pgSQL is read",
                        s.sval
                    )))
                }
                _ => {}
            }
        }
        let body = body.ok_or_else(|| {
            PlpgsqlError("the definition has no body PL/pgSQL can read".to_owned())
        })?;
        Self::compiled(body, definition)
    }

    fn compiled(body: String, text: &str) -> Result<Self, PlpgsqlError> {
        let tree = pg_query::parse_plpgsql(text)
            .map_err(|err| PlpgsqlError(format!("PL/pgSQL: {err}")))?;
        let mut block = DoBlock {
            body,
            sites: Vec::new(),
            writes: Vec::new(),
            handlers: 0,
            queries: Vec::new(),
            opaque: Vec::new(),
        };
        block.walk(&tree);
        Ok(block)
    }

    /// The number of statements the instrumented block logs per run of each site.
    pub fn sites(&self) -> usize {
        self.sites.len()
    }

    fn walk(&mut self, value: &Value) {
        match value {
            Value::Array(items) => items.iter().for_each(|item| self.walk(item)),
            Value::Object(map) => {
                for (key, inner) in map {
                    match key.as_str() {
                        "PLpgSQL_stmt_execsql" => self.execsql(inner),
                        "PLpgSQL_stmt_dynexecute" => self.dynexecute(inner),
                        "PLpgSQL_expr" => self.expression(inner),
                        "PLpgSQL_stmt_dynfors" => {
                            self.opaque.push("FOR … IN EXECUTE");
                            self.walk(inner);
                        }
                        "PLpgSQL_exception" => {
                            self.handlers += 1;
                            self.walk(inner);
                        }
                        "PLpgSQL_stmt_commit" | "PLpgSQL_stmt_rollback" => {
                            self.opaque.push("COMMIT or ROLLBACK in the block");
                        }
                        "PLpgSQL_stmt_open" if inner.get("dynquery").is_some() => {
                            self.opaque.push("OPEN … FOR EXECUTE");
                            self.walk(inner);
                        }
                        // Declarations: their defaults are expressions too.
                        _ => self.walk(inner),
                    }
                }
            }
            _ => {}
        }
    }

    fn execsql(&mut self, stmt: &Value) {
        let line = line_of(stmt);
        let Some(sql) = stmt
            .pointer("/sqlstmt/PLpgSQL_expr/query")
            .and_then(Value::as_str)
        else {
            return;
        };
        let is_query = match parse(sql) {
            Ok(parsed) => parsed.iter().all(|s| is_data_statement(&s.node)),
            Err(_) => true,
        };
        if is_query {
            if writes(sql) {
                self.writes.push(Site::Static {
                    line,
                    sql: sql.to_owned(),
                });
            }
            self.queries.push(sql.to_owned());
        } else {
            self.sites.push(Site::Static {
                line,
                sql: sql.to_owned(),
            });
        }
    }

    fn dynexecute(&mut self, stmt: &Value) {
        let line = line_of(stmt);
        if stmt.get("params").is_some() {
            self.opaque.push("EXECUTE … USING");
        }
        if let Some(expr) = stmt
            .pointer("/query/PLpgSQL_expr/query")
            .and_then(Value::as_str)
        {
            self.sites.push(Site::Dynamic {
                line,
                expr: expr.to_owned(),
            });
        }
        // The expression itself may read tables.
        self.walk(stmt);
    }

    fn expression(&mut self, expr: &Value) {
        let Some(query) = expr.get("query").and_then(Value::as_str) else {
            return;
        };
        let mode = expr.get("parseMode").and_then(Value::as_i64).unwrap_or(0);
        let sql = match mode {
            0 => query.to_owned(),
            // Assignments (`x := expr`, `x[1] := expr`, `x.f := expr`).
            3..=5 => match query.split_once(":=") {
                Some((_, rhs)) => format!("SELECT {rhs}"),
                None => format!("SELECT {query}"),
            },
            _ => format!("SELECT {query}"),
        };
        self.queries.push(sql);
    }

    /// The block with each logged site wrapped by `log_function` (a function of one
    /// `text` argument returning it, called before the statement runs), as a new `DO`
    /// statement.
    pub fn instrument(&self, log_function: &str) -> Result<String, PlpgsqlError> {
        let body = self.instrumented_body(log_function)?;
        let tag = free_tag(&body);
        Ok(format!("DO LANGUAGE plpgsql {tag}{body}{tag}"))
    }

    /// `definition` (the `CREATE FUNCTION` this was read from, [`DoBlock::of_function`])
    /// with its body replaced by the instrumented body: same signature and options.
    pub fn instrument_function(
        &self,
        definition: &str,
        log_function: &str,
    ) -> Result<String, PlpgsqlError> {
        let body = self.instrumented_body(log_function)?;
        let (at, len) = quoted_body(definition, &self.body).ok_or_else(|| {
            PlpgsqlError("the body was not found dollar-quoted in the definition".to_owned())
        })?;
        let tag = free_tag(&body);
        let mut out = definition.to_owned();
        out.replace_range(at..at + len, &format!("{tag}{body}{tag}"));
        Ok(out)
    }

    /// The body with each logged site wrapped by `log_function`.
    fn instrumented_body(&self, log_function: &str) -> Result<String, PlpgsqlError> {
        let mut edits: Vec<Edit> = Vec::new();
        for site in &self.sites {
            let found = self.locate(site)?;
            match site {
                Site::Dynamic { expr, .. } => {
                    edits.push((found, expr.len(), format!("{log_function}(({expr})::text)")))
                }
                Site::Static { sql, .. } => edits.push((
                    found,
                    0,
                    format!("PERFORM {log_function}({}); ", quote_literal(sql)),
                )),
            }
        }
        Ok(self.edited_body(edits))
    }

    /// The offset in the body of a site's text (the `EXECUTE`'s expression, or the
    /// static statement), found from its line; for an `EXECUTE`, the keyword must
    /// come right before it.
    pub(crate) fn locate(&self, site: &Site) -> Result<usize, PlpgsqlError> {
        let (line, needle) = match site {
            Site::Dynamic { line, expr } => (*line, expr),
            Site::Static { line, sql } => (*line, sql),
        };
        let from = line
            .checked_sub(1)
            .and_then(|l| {
                std::iter::once(0)
                    .chain(self.body.match_indices('\n').map(|(i, _)| i + 1))
                    .nth(l)
            })
            .ok_or_else(|| PlpgsqlError(format!("line {line} is not in the body")))?;
        let found = self.body[from..]
            .find(needle.as_str())
            .map(|at| at + from)
            .ok_or_else(|| {
                PlpgsqlError(format!("the statement on body line {line} was not found"))
            })?;
        if let Site::Dynamic { .. } = site {
            let before = self.body[..found].trim_end();
            if !before.to_ascii_uppercase().ends_with("EXECUTE") {
                return Err(PlpgsqlError(format!(
                    "the EXECUTE on body line {line} was not found"
                )));
            }
        }
        Ok(found)
    }

    /// The body with `edits` applied (from the end).
    fn edited_body(&self, mut edits: Vec<Edit>) -> String {
        edits.sort_by_key(|edit| std::cmp::Reverse(edit.0));
        let mut body = self.body.clone();
        for (at, len, replacement) in edits {
            body.replace_range(at..at + len, &replacement);
        }
        body
    }

    /// The body with `edits` applied (from the end), as a new `DO` statement whose
    /// dollar quote does not occur in it.
    pub(crate) fn edited(&self, edits: Vec<Edit>) -> String {
        let body = self.edited_body(edits);
        let tag = free_tag(&body);
        format!("DO LANGUAGE plpgsql {tag}{body}{tag}")
    }
}

/// An edit of a body: offset, bytes replaced, replacement.
pub(crate) type Edit = (usize, usize, String);

/// Whether a statement of the body changes table data.
fn writes(sql: &str) -> bool {
    parse(sql).is_ok_and(|parsed| {
        parsed.iter().any(|s| {
            matches!(
                s.node,
                NodeEnum::InsertStmt(_)
                    | NodeEnum::UpdateStmt(_)
                    | NodeEnum::DeleteStmt(_)
                    | NodeEnum::MergeStmt(_)
            )
        })
    })
}

/// A dollar-quote tag (`$pgshift_trace$`) that `body` does not contain.
fn free_tag(body: &str) -> String {
    let mut tag = "pgshift_trace".to_owned();
    while body.contains(&format!("${tag}$")) {
        tag.push('x');
    }
    format!("${tag}$")
}

/// Where `body` stands in `definition` with its dollar quotes (offset, length), when
/// it stands there exactly once.
fn quoted_body(definition: &str, body: &str) -> Option<(usize, usize)> {
    let mut found = None;
    for (at, _) in definition.match_indices(body) {
        let before = &definition[..at];
        let Some(open) = before.strip_suffix('$').and_then(|b| b.rfind('$')) else {
            continue;
        };
        let tag = &definition[open..at];
        let valid = tag[1..tag.len() - 1]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if valid && definition[at + body.len()..].starts_with(tag) {
            if found.is_some() {
                return None;
            }
            found = Some((open, tag.len() * 2 + body.len()));
        }
    }
    found
}

pub(crate) fn line_of(stmt: &Value) -> usize {
    stmt.get("lineno")
        .and_then(Value::as_u64)
        .and_then(|l| usize::try_from(l).ok())
        .unwrap_or(1)
}

/// Whether a statement reads or writes table data (rather than changing the schema).
pub fn is_data_statement(node: &NodeEnum) -> bool {
    matches!(
        node,
        NodeEnum::SelectStmt(_)
            | NodeEnum::InsertStmt(_)
            | NodeEnum::UpdateStmt(_)
            | NodeEnum::DeleteStmt(_)
            | NodeEnum::MergeStmt(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const RELAY: &str = "DO $$\nDECLARE expr text;\nBEGIN\n  SELECT pg_get_expr(d.adbin, d.adrelid) INTO expr FROM pg_attrdef d WHERE d.adrelid = 'events'::regclass;\n  ALTER TABLE events DROP COLUMN search_tsv;\n  EXECUTE format('ALTER TABLE events ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS (%s) STORED', expr);\nEND $$";

    fn block(sql: &str) -> DoBlock {
        let statements = parse(sql).expect("parses");
        DoBlock::of(&statements[0]).expect("reads")
    }

    #[test]
    fn static_ddl_and_execute_are_sites_and_the_rest_are_queries() {
        let block = block(RELAY);
        assert_eq!(block.sites(), 2);
        assert!(block.opaque.is_empty());
        assert!(block.queries.iter().any(|q| q.contains("pg_attrdef")));
        assert!(block
            .queries
            .iter()
            .any(|q| q.starts_with("SELECT format(")));
    }

    #[test]
    fn the_instrumented_block_logs_before_it_executes_and_parses() {
        let out = block(RELAY).instrument("log_it").expect("instruments");
        assert!(
            out.contains("PERFORM log_it('ALTER TABLE events DROP COLUMN search_tsv'); ALTER TABLE events DROP COLUMN search_tsv;"),
            "{out}"
        );
        assert!(out.contains("EXECUTE log_it((format('ALTER TABLE"), "{out}");
        let parsed = parse(&out).expect("the instrumented block parses");
        let again = DoBlock::of(&parsed[0]).expect("and compiles");
        assert!(again.queries.iter().any(|q| q.contains("log_it")), "{out}");
    }

    #[test]
    fn using_and_dynamic_loops_are_opaque() {
        let block = block(
            "DO $$ DECLARE r record; BEGIN EXECUTE 'SELECT $1' USING 1; FOR r IN EXECUTE 'SELECT 1' LOOP END LOOP; END $$",
        );
        assert!(block.opaque.contains(&"EXECUTE … USING"));
        assert!(block.opaque.contains(&"FOR … IN EXECUTE"));
    }

    const FUNCTION: &str = "CREATE OR REPLACE FUNCTION public.add_col(tbl regclass)\n RETURNS void\n LANGUAGE plpgsql\n SECURITY DEFINER\nAS $function$\nBEGIN\n    IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = tbl AND attname = 'x') THEN RETURN; END IF;\n    EXECUTE format('ALTER TABLE %s ADD COLUMN x int', tbl);\n    CREATE TABLE IF NOT EXISTS side (id int);\nEND\n$function$\n";

    #[test]
    fn a_function_body_is_read_and_only_the_body_is_instrumented() {
        let block = DoBlock::of_function(FUNCTION).expect("reads");
        assert_eq!(block.sites(), 2);
        assert!(block.queries.iter().any(|q| q.contains("pg_attribute")));
        let out = block
            .instrument_function(FUNCTION, "log_it")
            .expect("instruments");
        assert!(
            out.starts_with("CREATE OR REPLACE FUNCTION public.add_col(tbl regclass)\n RETURNS void\n LANGUAGE plpgsql\n SECURITY DEFINER\nAS $pgshift_trace$"),
            "{out}"
        );
        assert!(
            out.contains("EXECUTE log_it((format('ALTER TABLE %s"),
            "{out}"
        );
        assert!(
            out.contains(
                "PERFORM log_it('CREATE TABLE IF NOT EXISTS side (id int)'); CREATE TABLE"
            ),
            "{out}"
        );
        let again = DoBlock::of_function(&out).expect("the instrumented definition compiles");
        assert!(again.queries.iter().any(|q| q.contains("log_it")), "{out}");
    }

    #[test]
    fn a_function_in_another_language_is_not_read() {
        let sql = "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$";
        let err = DoBlock::of_function(sql).expect_err("not PL/pgSQL");
        assert!(err.0.contains("LANGUAGE sql"), "{err}");
    }

    #[test]
    fn another_language_is_not_read() {
        let statements = parse("DO LANGUAGE plpython3u $$ pass $$").expect("parses");
        assert!(DoBlock::of(&statements[0]).is_err());
    }
}
