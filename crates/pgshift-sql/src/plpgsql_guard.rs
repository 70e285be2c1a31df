//! The guard's copy of a `DO` block: the block as written, with a `RAISE NOTICE`
//! before every statement it would execute and at the start of every exception
//! handler, for a run on the live database in a `READ ONLY` transaction
//! (`pgshift::procedural`, rule PC-5).
//!
//! A notice is the one report that survives what the block does with errors: a
//! table row or a setting written by the block would be rolled back with the
//! subtransaction of an `EXCEPTION` clause, a notice has already gone to the client.
//! Each notice starts with the caller's marker, then `statement ` and the exact text
//! (an `EXECUTE`'s string, a static DDL or data-changing statement), or `handler `
//! and the SQLSTATE the handler caught.
//!
//! An `EXECUTE`'s expression is evaluated twice (once for the notice, once by the
//! `EXECUTE`); a volatile expression may report a string other than the one run.

use serde_json::Value;

use crate::ident::quote_literal;
use crate::plpgsql::{DoBlock, Edit, PlpgsqlError, Site};

/// What one notice of a guarded run says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GuardNotice {
    /// The block was about to execute this statement.
    Statement(String),
    /// An exception handler was entered, having caught this SQLSTATE.
    Handler(String),
}

impl GuardNotice {
    /// Reads a notice's message: `None` when it does not start with `marker`.
    pub fn read(marker: &str, message: &str) -> Option<GuardNotice> {
        let rest = message.strip_prefix(marker)?.strip_prefix(' ')?;
        if let Some(sql) = rest.strip_prefix("statement ") {
            return Some(GuardNotice::Statement(sql.to_owned()));
        }
        rest.strip_prefix("handler ")
            .map(|state| GuardNotice::Handler(state.to_owned()))
    }
}

impl DoBlock {
    /// Whether the block has a statement the guard reports: an `EXECUTE`, a static
    /// DDL or data-changing statement.
    pub fn executes_statements(&self) -> bool {
        !self.sites.is_empty() || !self.writes.is_empty()
    }

    /// The block with a notice (starting with `marker`: letters, digits, `-`, `_`
    /// and spaces) before each statement it executes (every `EXECUTE`, every static
    /// DDL and data-changing statement) and at the start of every exception handler.
    /// The copy is compiled again and checked: every handler must begin with the
    /// notice.
    pub fn instrument_guard(&self, marker: &str) -> Result<String, PlpgsqlError> {
        if marker.is_empty()
            || !marker
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ' '))
        {
            return Err(PlpgsqlError(format!("bad guard marker `{marker}`")));
        }
        let mut edits: Vec<Edit> = Vec::new();
        for site in self.sites.iter().chain(&self.writes) {
            let found = self.locate(site)?;
            let notice = match site {
                Site::Dynamic { expr, .. } => {
                    let keyword = self.body[..found].trim_end().len() - "EXECUTE".len();
                    edits.push((
                        keyword,
                        0,
                        format!(
                            "RAISE NOTICE '%', {} || COALESCE(({expr})::text, '<NULL>'); ",
                            quote_literal(&format!("{marker} statement "))
                        ),
                    ));
                    continue;
                }
                Site::Static { sql, .. } => format!("{marker} statement {sql}"),
            };
            edits.push((
                found,
                0,
                format!("RAISE NOTICE '%', {}; ", quote_literal(&notice)),
            ));
        }
        let thens = handler_thens(&self.body)?;
        if thens.len() != self.handlers {
            return Err(PlpgsqlError(format!(
                "found {} exception handlers in the text, the compiler found {}",
                thens.len(),
                self.handlers
            )));
        }
        let handler_notice = format!(
            " RAISE NOTICE '%', {} || SQLSTATE;",
            quote_literal(&format!("{marker} handler "))
        );
        for at in thens {
            edits.push((at, 0, handler_notice.clone()));
        }
        let text = self.edited(edits);
        let tree = pg_query::parse_plpgsql(&text)
            .map_err(|err| PlpgsqlError(format!("the guard's copy does not compile: {err}")))?;
        let mut checked = 0;
        if !every_handler_raises_first(&tree, marker, &mut checked) || checked != self.handlers {
            return Err(PlpgsqlError(
                "an exception handler of the guard's copy does not begin with its notice"
                    .to_owned(),
            ));
        }
        Ok(text)
    }
}

/// Whether every exception handler of the compiled tree begins with the `RAISE` of
/// the guard's notice (its expression names `marker`); `count` is the number of
/// handlers seen.
fn every_handler_raises_first(value: &Value, marker: &str, count: &mut usize) -> bool {
    match value {
        Value::Array(items) => items
            .iter()
            .all(|v| every_handler_raises_first(v, marker, count)),
        Value::Object(map) => map.iter().all(|(key, inner)| {
            if key == "PLpgSQL_exception" {
                *count += 1;
                let first = inner
                    .pointer("/action/0/PLpgSQL_stmt_raise")
                    .is_some_and(|raise| raise.to_string().contains(&format!("{marker} handler ")));
                first && every_handler_raises_first(inner, marker, count)
            } else {
                every_handler_raises_first(inner, marker, count)
            }
        }),
        _ => true,
    }
}

/// What a `BEGIN`, `IF`, `CASE` or `LOOP` opened, while scanning a body.
enum Frame {
    Block { handlers: bool, want_then: bool },
    Other,
}

/// The offsets just past the `THEN` of each exception handler (`WHEN cond THEN`) of
/// the body, read with PostgreSQL's SQL scanner (strings, quoted names, comments and
/// dollar quotes are tokens of their own) and the nesting of `BEGIN`/`IF`/`CASE`/
/// `LOOP` … `END`.
fn handler_thens(body: &str) -> Result<Vec<usize>, PlpgsqlError> {
    let scanned =
        pg_query::scan(body).map_err(|err| PlpgsqlError(format!("scanning the body: {err}")))?;
    let mut words: Vec<(usize, String)> = Vec::new();
    for token in &scanned.tokens {
        let (Ok(start), Ok(end)) = (usize::try_from(token.start), usize::try_from(token.end))
        else {
            continue;
        };
        let Some(text) = body.get(start..end) else {
            continue;
        };
        if text.starts_with("--") || text.starts_with("/*") {
            continue;
        }
        words.push((end, text.to_ascii_uppercase()));
    }
    let mut stack: Vec<Frame> = Vec::new();
    let mut out = Vec::new();
    let mut previous = String::from(";");
    for (end, word) in words {
        let after_end = previous == "END";
        let statement_start = matches!(
            previous.as_str(),
            ";" | "THEN" | "ELSE" | "LOOP" | "BEGIN" | ">>"
        );
        match word.as_str() {
            "BEGIN" => stack.push(Frame::Block {
                handlers: false,
                want_then: false,
            }),
            "CASE" | "LOOP" if !after_end => stack.push(Frame::Other),
            "IF" if !after_end && statement_start => stack.push(Frame::Other),
            "END" => {
                stack.pop();
            }
            "EXCEPTION" if matches!(previous.as_str(), ";" | "BEGIN") => {
                if let Some(Frame::Block { handlers, .. }) = stack.last_mut() {
                    *handlers = true;
                }
            }
            "WHEN" => {
                if let Some(Frame::Block {
                    handlers: true,
                    want_then,
                }) = stack.last_mut()
                {
                    *want_then = true;
                }
            }
            "THEN" => {
                if let Some(Frame::Block {
                    want_then: want @ true,
                    ..
                }) = stack.last_mut()
                {
                    *want = false;
                    out.push(end);
                }
            }
            _ => {}
        }
        previous = word;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse;

    fn guarded(sql: &str) -> String {
        let statements = parse(sql).expect("parses");
        DoBlock::of(&statements[0])
            .expect("reads")
            .instrument_guard("m-1")
            .expect("instruments")
    }

    #[test]
    fn statements_and_handlers_get_a_notice_first() {
        let out = guarded(
            "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM t LIMIT 1) THEN ALTER TABLE t ALTER COLUMN c TYPE bigint; END IF; \
             BEGIN EXECUTE format('DROP INDEX %I', 'i'); INSERT INTO log VALUES (1); EXCEPTION WHEN others THEN NULL; END; \
             CASE WHEN true THEN NULL; END CASE; END $$",
        );
        assert!(
            out.contains("RAISE NOTICE '%', 'm-1 statement ALTER TABLE t ALTER COLUMN c TYPE bigint'; ALTER TABLE"),
            "{out}"
        );
        assert!(
            out.contains("RAISE NOTICE '%', 'm-1 statement ' || COALESCE((format('DROP INDEX %I', 'i'))::text, '<NULL>'); EXECUTE format("),
            "{out}"
        );
        assert!(
            out.contains("RAISE NOTICE '%', 'm-1 statement INSERT INTO log VALUES (1)'; INSERT"),
            "{out}"
        );
        assert!(
            out.contains("WHEN others THEN RAISE NOTICE '%', 'm-1 handler ' || SQLSTATE; NULL;"),
            "{out}"
        );
        assert_eq!(out.matches("handler").count(), 1, "{out}");
    }

    #[test]
    fn nested_handlers_and_their_inner_then_are_told_apart() {
        let out = guarded(
            "DO $$ BEGIN BEGIN PERFORM 1; EXCEPTION WHEN division_by_zero OR unique_violation THEN \
             IF true THEN BEGIN PERFORM 2; EXCEPTION WHEN others THEN PERFORM 3; END; END IF; \
             WHEN others THEN RAISE; END; END $$",
        );
        assert_eq!(out.matches("|| SQLSTATE").count(), 3, "{out}");
    }

    #[test]
    fn notices_are_read_back_by_marker_only() {
        assert_eq!(
            GuardNotice::read("m-1", "m-1 statement ALTER TABLE t"),
            Some(GuardNotice::Statement("ALTER TABLE t".to_owned()))
        );
        assert_eq!(
            GuardNotice::read("m-1", "m-1 handler 25006"),
            Some(GuardNotice::Handler("25006".to_owned()))
        );
        assert_eq!(GuardNotice::read("m-1", "m-12 handler 25006"), None);
        assert_eq!(GuardNotice::read("m-1", "hello"), None);
    }

    #[test]
    fn a_bad_marker_is_refused() {
        let statements = parse("DO $$ BEGIN PERFORM 1; END $$").expect("parses");
        let block = DoBlock::of(&statements[0]).expect("reads");
        assert!(block.instrument_guard("x'; DROP").is_err());
    }
}
