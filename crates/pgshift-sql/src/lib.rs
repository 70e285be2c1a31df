//! The one boundary where SQL text becomes a syntax tree.
//!
//! Every statement pgshift judges or runs passes through [`parse`], which uses
//! PostgreSQL's own grammar (libpg_query, through the `pg_query` crate). Nothing in
//! pgshift splits SQL on `;` or edits SQL as text: statements are located by the
//! parser's own offsets, and new SQL is produced from syntax trees ([`deparse`]) or
//! from quoted identifiers ([`quote_ident`]).
//!
//! # Brief overview
//! - [`parse`] turns a text into [`Statement`]s, each with its exact [`Span`] and
//!   [`Position`] (line and column of its first token), or a [`ParseError`] that says
//!   where the text stopped being valid SQL.
//! - [`LineIndex`] converts byte offsets into line and column.
//! - [`deparse`] turns a statement node back into SQL text.
//! - [`quote_ident`] and [`QualifiedName`] always quote identifiers.
//! - [`sections`] cuts a file at marker comments (dbmate, goose) found by the scanner.
//!
//! ```
//! let stmts = pgshift_sql::parse("SET lock_timeout = '2s';\nCREATE INDEX i ON t (a);").unwrap();
//! assert_eq!(stmts.len(), 2);
//! assert_eq!(stmts[1].position.line, 2);
//! assert_eq!(stmts[1].text, "CREATE INDEX i ON t (a)");
//! ```
#![deny(missing_docs)]

mod cursor;
mod deparse;
mod ident;
mod lines;
mod parse;
mod plpgsql;
mod plpgsql_guard;
mod sections;

pub use deparse::{deparse, DeparseError};
pub use ident::{quote_ident, quote_literal, QualifiedName};
pub use lines::{LineIndex, Position, Span};
pub use parse::{parse, ParseError, Statement};
pub use plpgsql::{is_data_statement, DoBlock, PlpgsqlError};
pub use plpgsql_guard::GuardNotice;
pub use sections::{line_comments, sections, LineComment, Section};

/// The syntax tree types produced by PostgreSQL's grammar (protobuf form).
pub use pg_query::protobuf as ast;
/// One node of the syntax tree.
pub use pg_query::NodeEnum;
/// A borrowed view of a syntax tree node, as yielded by `NodeEnum::nodes`.
pub use pg_query::NodeRef;
