//! Parsing a text into located statements with PostgreSQL's grammar.

use pg_query::protobuf::{ScanToken, Token};
use pg_query::NodeEnum;
use thiserror::Error;

use crate::cursor;
use crate::lines::{LineIndex, Position, Span};

/// One top-level statement of a text, located exactly.
#[derive(Clone, Debug)]
pub struct Statement {
    /// Zero-based index of the statement within its text.
    pub index: usize,
    /// Bytes from the statement's first token to its last (the `;` excluded).
    pub span: Span,
    /// Line and column of the statement's first token.
    pub position: Position,
    /// The statement's own text (`span` of the source).
    pub text: String,
    /// Comments between the previous statement and this one, in order, with their
    /// markers (`--`, `/* */`) stripped and whitespace trimmed.
    pub leading_comments: Vec<String>,
    /// The syntax tree of the statement.
    pub node: NodeEnum,
}

/// Why a text is not valid SQL. Every variant says where, when the grammar said.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseError {
    /// The grammar rejected the text.
    #[error("{message}")]
    Syntax {
        /// PostgreSQL's own message (for example `syntax error at or near "x"`).
        message: String,
        /// Byte offset where the grammar stopped, when it reported one.
        offset: Option<usize>,
        /// The same place as line and column.
        position: Option<Position>,
    },
    /// The text contains a NUL byte, which no SQL text can hold.
    #[error("input contains a NUL byte (binary data is not SQL)")]
    NulByte {
        /// Byte offset of the first NUL.
        offset: usize,
        /// The same place as line and column.
        position: Position,
    },
    /// The parser's output could not be read back (for example, nesting deeper than
    /// the decoder accepts).
    #[error("the statement tree could not be decoded: {message}")]
    Decode {
        /// What went wrong.
        message: String,
    },
}

impl ParseError {
    /// The position of the error in the text, when known.
    pub fn position(&self) -> Option<Position> {
        match self {
            ParseError::Syntax { position, .. } => *position,
            ParseError::NulByte { position, .. } => Some(*position),
            ParseError::Decode { .. } => None,
        }
    }
}

/// Parses `text` into its top-level statements.
///
/// An empty text (or only comments) gives no statements. Any syntax error anywhere
/// fails the whole text: nothing after an error is returned as if it were valid.
pub fn parse(text: &str) -> Result<Vec<Statement>, ParseError> {
    let lines = LineIndex::new(text);
    if let Some(offset) = text.find('\0') {
        return Err(ParseError::NulByte {
            offset,
            position: lines.position(offset),
        });
    }
    // INV: CO-1 — one parse of the whole text by the real grammar; statements come from its offsets.
    let tree = match pg_query::parse(text, 0) {
        Ok(tree) => tree,
        Err(pg_query::Error::Parse(message)) => return Err(syntax_error(text, &lines, message)),
        Err(other) => {
            return Err(ParseError::Decode {
                message: other.to_string(),
            })
        }
    };
    let tokens = scan_tokens(text)?;
    let mut statements = Vec::with_capacity(tree.protobuf.stmts.len());
    let mut previous_end = 0usize;
    for (index, raw) in tree.protobuf.stmts.into_iter().enumerate() {
        let node = raw
            .stmt
            .and_then(|node| node.node)
            .ok_or_else(|| ParseError::Decode {
                message: format!("statement {} has no syntax tree", index + 1),
            })?;
        let raw_start = usize::try_from(raw.stmt_location)
            .unwrap_or(0)
            .min(text.len());
        let raw_end = match usize::try_from(raw.stmt_len) {
            Ok(0) | Err(_) => text.len(),
            Ok(len) => (raw_start + len).min(text.len()),
        };
        let located = locate(&tokens, previous_end.min(raw_start), raw_end);
        let span = located.span.unwrap_or(Span {
            start: raw_start,
            end: raw_end,
        });
        let leading_comments = located
            .comments
            .iter()
            .map(|token| comment_text(&text[token.0..token.1]))
            .collect();
        previous_end = raw_end;
        statements.push(Statement {
            index,
            span,
            position: lines.position(span.start),
            text: text[span.start..span.end].to_owned(),
            leading_comments,
            node,
        });
    }
    Ok(statements)
}

fn syntax_error(text: &str, lines: &LineIndex<'_>, message: String) -> ParseError {
    let offset = cursor::error_offset(text);
    ParseError::Syntax {
        message,
        offset,
        position: offset.map(|at| lines.position(at)),
    }
}

/// What the statement locator needs to know of a token.
#[derive(Clone, Copy, PartialEq, Eq)]
enum TokenKind {
    Comment,
    Semicolon,
    Other,
}

/// Token boundaries of a text: `(start, end, kind)`.
type TokenBounds = Vec<(usize, usize, TokenKind)>;

/// PostgreSQL's scanner over `text`.
pub(crate) fn scan(text: &str) -> Result<pg_query::protobuf::ScanResult, ParseError> {
    pg_query::scan(text).map_err(|err| ParseError::Decode {
        message: err.to_string(),
    })
}

fn scan_tokens(text: &str) -> Result<TokenBounds, ParseError> {
    let scanned = scan(text)?;
    Ok(scanned
        .tokens
        .iter()
        .map(|token: &ScanToken| {
            let kind = match Token::try_from(token.token) {
                Ok(Token::SqlComment | Token::CComment) => TokenKind::Comment,
                Ok(Token::Ascii59) => TokenKind::Semicolon,
                _ => TokenKind::Other,
            };
            (
                usize::try_from(token.start).unwrap_or(0),
                usize::try_from(token.end).unwrap_or(0),
                kind,
            )
        })
        .collect())
}

struct Located {
    span: Option<Span>,
    comments: Vec<(usize, usize)>,
}

/// Finds the first and last non-comment tokens within `[start, end)`, and the comments
/// before the first one. `start` is the end of the previous statement, so that comments
/// between two statements belong to the second; `;` tokens there are skipped.
fn locate(tokens: &TokenBounds, start: usize, end: usize) -> Located {
    let first_index = tokens.partition_point(|token| token.0 < start);
    let mut comments = Vec::new();
    let mut first = None;
    let mut last = None;
    for &(token_start, token_end, kind) in &tokens[first_index..] {
        if token_start >= end {
            break;
        }
        if kind == TokenKind::Comment {
            if first.is_none() {
                comments.push((token_start, token_end));
            }
            continue;
        }
        if first.is_none() && kind == TokenKind::Semicolon {
            continue;
        }
        first.get_or_insert(token_start);
        last = Some(token_end.min(end));
    }
    Located {
        span: first.zip(last).map(|(start, end)| Span { start, end }),
        comments,
    }
}

fn comment_text(raw: &str) -> String {
    let inner = if let Some(rest) = raw.strip_prefix("--") {
        rest
    } else {
        raw.strip_prefix("/*")
            .and_then(|rest| rest.strip_suffix("*/"))
            .unwrap_or(raw)
    };
    inner.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_carry_exact_positions_and_text() {
        let text = "-- leading note\nBEGIN;\n  CREATE INDEX i ON t (a) ;\n/* c */ COMMIT";
        let stmts = parse(text).expect("valid SQL");
        assert_eq!(stmts.len(), 3);
        assert_eq!(stmts[0].text, "BEGIN");
        assert_eq!(stmts[0].position, Position { line: 2, column: 1 });
        assert_eq!(stmts[0].leading_comments, vec!["leading note".to_owned()]);
        assert_eq!(stmts[1].text, "CREATE INDEX i ON t (a)");
        assert_eq!(stmts[1].position, Position { line: 3, column: 3 });
        assert_eq!(stmts[2].text, "COMMIT");
        assert_eq!(stmts[2].leading_comments, vec!["c".to_owned()]);
    }

    #[test]
    fn semicolons_inside_strings_and_bodies_do_not_split() {
        let text = "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1; $$; SELECT ';'";
        let stmts = parse(text).expect("valid SQL");
        assert_eq!(stmts.len(), 2);
        assert!(matches!(stmts[0].node, NodeEnum::CreateFunctionStmt(_)));
        assert_eq!(stmts[1].text, "SELECT ';'");
    }

    #[test]
    fn empty_and_comment_only_texts_have_no_statements() {
        assert!(parse("").expect("empty is valid").is_empty());
        assert!(parse("  -- nothing\n/* here */\n;;")
            .expect("valid")
            .is_empty());
    }

    #[test]
    fn syntax_error_reports_the_grammar_position() {
        let text = "SELECT 1;\nCREATE TABLE t (a int,, b int);";
        let err = parse(text).expect_err("invalid SQL");
        match err {
            ParseError::Syntax {
                message, position, ..
            } => {
                assert!(message.contains("syntax error"), "{message}");
                assert_eq!(
                    position,
                    Some(Position {
                        line: 2,
                        column: 23
                    })
                );
            }
            other => panic!("unexpected error {other:?}"),
        }
    }

    #[test]
    fn unterminated_dollar_quote_is_a_located_error() {
        let text = "SELECT 1;\nDO $$ BEGIN PERFORM 1;";
        let err = parse(text).expect_err("unterminated");
        let position = err.position().expect("position known");
        assert_eq!(position.line, 2);
    }

    #[test]
    fn nul_byte_is_refused_with_its_position() {
        let err = parse("SELECT 1;\nSE\0LECT").expect_err("binary");
        assert_eq!(err.position(), Some(Position { line: 2, column: 3 }));
    }

    #[test]
    fn multibyte_text_keeps_character_columns() {
        let text = "SELECT 'ééé';\nSELECT x FROM \"tablé\" WHERE";
        let err = parse(text).expect_err("incomplete");
        let position = err.position().expect("position known");
        assert_eq!(position.line, 2);
    }
}
