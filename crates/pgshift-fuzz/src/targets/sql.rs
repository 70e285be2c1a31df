//! `sql_parse`: the SQL boundary. The bytes are a file: decoded as pgshift decodes
//! files, parsed, every statement located, deparsed, and identifiers and literals from
//! the input quoted and parsed back.

use pgshift_sql::ast::a_const::Val;
use pgshift_sql::{
    deparse, quote_ident, quote_literal, LineIndex, NodeEnum, NodeRef, ParseError, QualifiedName,
    Statement,
};

use crate::input;

/// PostgreSQL truncates longer identifiers (`NAMEDATALEN - 1` bytes).
const MAX_IDENTIFIER_BYTES: usize = 63;

/// How many names of one input are quoted and parsed back (each costs a parse).
const MAX_NAMES_CHECKED: usize = 16;

/// Runs one input.
pub fn sql_parse(data: &[u8]) {
    if !input::within_limit(data) {
        return;
    }
    let Some(text) = input::text(data) else {
        return;
    };
    match pgshift_sql::parse(&text) {
        Ok(statements) => {
            check_located(&text, &statements);
            let mut names = Vec::new();
            for statement in &statements {
                // The deparser may refuse a tree; it must not crash.
                let _ = deparse(&statement.node);
                collect_names(&statement.node, &mut names);
            }
            names.truncate(MAX_NAMES_CHECKED);
            for (schema, name) in &names {
                check_quoted_name(schema, name);
            }
        }
        Err(err) => check_error(&text, &err),
    }
    let first_line = text.lines().next().unwrap_or("");
    check_quoted_name("", input::clip(first_line, MAX_IDENTIFIER_BYTES));
    check_quoted_literal(input::clip(&text, 4096));
    check_line_index(&text, data);
}

/// Statements are in order, do not overlap, sit on character boundaries and carry
/// their own text and position.
fn check_located(text: &str, statements: &[Statement]) {
    let lines = LineIndex::new(text);
    let mut previous_end = 0;
    for (index, statement) in statements.iter().enumerate() {
        let span = statement.span;
        assert_eq!(statement.index, index);
        assert!(span.start <= span.end && span.end <= text.len(), "{span:?}");
        assert!(span.start >= previous_end, "statements overlap: {span:?}");
        assert!(text.is_char_boundary(span.start) && text.is_char_boundary(span.end));
        assert_eq!(statement.text, &text[span.start..span.end]);
        assert_eq!(statement.position, lines.position(span.start));
        previous_end = span.end;
    }
}

/// A parse error's position, when given, is inside the text.
fn check_error(text: &str, err: &ParseError) {
    let lines = LineIndex::new(text);
    let last = lines.position(text.len());
    if let Some(position) = err.position() {
        assert!(position.line >= 1 && position.column >= 1, "{err:?}");
        assert!(position <= last, "{err:?} is past the end ({last:?})");
    }
    if let ParseError::Syntax {
        offset: Some(offset),
        ..
    } = err
    {
        assert!(*offset <= text.len(), "{err:?}");
    }
    assert!(!err.to_string().is_empty());
}

/// Relation names (schema, name) and column names written in the statement.
fn collect_names(node: &NodeEnum, names: &mut Vec<(String, String)>) {
    for (node, _, _, _) in node.nodes() {
        match node {
            NodeRef::RangeVar(range_var) => {
                names.push((range_var.schemaname.clone(), range_var.relname.clone()))
            }
            NodeRef::ColumnDef(column) => names.push((String::new(), column.colname.clone())),
            _ => {}
        }
    }
}

/// A name quoted by pgshift reads back as the same name, whatever its characters.
fn check_quoted_name(schema: &str, name: &str) {
    let usable = |part: &str| part.len() <= MAX_IDENTIFIER_BYTES && !part.contains('\0');
    if name.is_empty() || !usable(name) || !usable(schema) {
        return;
    }
    let qualified = if schema.is_empty() {
        QualifiedName::bare(name)
    } else {
        QualifiedName::qualified(schema, name)
    };
    let sql = format!("SELECT * FROM {qualified}");
    let read_back = read_back(&sql, |node| match node {
        NodeRef::RangeVar(range_var) => {
            Some((range_var.schemaname.clone(), range_var.relname.clone()))
        }
        _ => None,
    });
    assert_eq!(
        read_back,
        Some((schema.to_owned(), name.to_owned())),
        "{sql}"
    );
    assert!(sql.ends_with(&quote_ident(name)), "{sql}");
}

/// A value quoted by pgshift reads back as the same string constant.
fn check_quoted_literal(value: &str) {
    if value.contains('\0') {
        return;
    }
    let sql = format!("SELECT {}", quote_literal(value));
    let read_back = read_back(&sql, |node| match node {
        NodeRef::AConst(constant) => match &constant.val {
            Some(Val::Sval(s)) => Some(s.sval.clone()),
            _ => None,
        },
        _ => None,
    });
    assert_eq!(read_back.as_deref(), Some(value), "{sql}");
}

/// Parses SQL that pgshift quoted (it must be one statement) and finds the first node
/// `pick` reads something from.
fn read_back<T>(sql: &str, pick: impl Fn(NodeRef<'_>) -> Option<T>) -> Option<T> {
    let statements =
        pgshift_sql::parse(sql).unwrap_or_else(|err| panic!("quoted SQL parses ({err}): {sql}"));
    assert_eq!(statements.len(), 1, "{sql}");
    statements[0]
        .node
        .nodes()
        .into_iter()
        .find_map(|(node, ..)| pick(node))
}

/// Any offset, in or past the text, gives a position and a line.
fn check_line_index(text: &str, data: &[u8]) {
    let lines = LineIndex::new(text);
    for &byte in data.iter().take(8) {
        let offset = usize::from(byte) * text.len().max(1) / 255 + usize::from(byte % 3);
        let position = lines.position(offset);
        assert!(position.line >= 1 && position.column >= 1);
        let _ = lines.line_text(offset);
    }
}
