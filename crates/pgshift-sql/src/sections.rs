//! Migration files that hold more than one script, cut at marker comments: dbmate's
//! `-- migrate:up` / `-- migrate:down`, goose's `-- +goose Up` / `-- +goose Down`.
//!
//! The markers are found with PostgreSQL's own scanner, so a `--` inside a string
//! literal or a dollar-quoted function body is never a marker. A section is returned
//! as the whole text with everything outside it blanked (newlines kept), so that the
//! positions of its statements are the positions in the file.

use pg_query::protobuf::Token;

use crate::lines::Span;
use crate::parse::ParseError;

/// A `--` comment, as the scanner found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineComment {
    /// Its bytes, from `--` to the end of its line (the newline excluded).
    pub span: Span,
    /// Its text after `--`, whitespace trimmed.
    pub text: String,
}

/// Every `--` comment of `text`, in order.
pub fn line_comments(text: &str) -> Result<Vec<LineComment>, ParseError> {
    let scanned = crate::parse::scan(text)?;
    Ok(scanned
        .tokens
        .iter()
        .filter(|token| Token::try_from(token.token) == Ok(Token::SqlComment))
        .filter_map(|token| {
            let start = usize::try_from(token.start).ok()?;
            let end = usize::try_from(token.end).ok()?;
            let body = text.get(start..end)?.strip_prefix("--")?;
            Some(LineComment {
                span: Span { start, end },
                text: body.trim().to_owned(),
            })
        })
        .collect())
}

/// One section of a text: what a marker comment opens, up to the next marker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section<M> {
    /// What the marker said.
    pub marker: M,
    /// The marker comment.
    pub marker_span: Span,
    /// The section's bytes, from the end of its marker to the next marker (or the end).
    pub span: Span,
    /// The whole text with everything outside `span` blanked: each character a space
    /// per byte, newlines kept, so that offsets, lines and columns are the file's.
    pub text: String,
}

/// Cuts `text` at the `--` comments that `marker` recognises; the text before the
/// first marker belongs to no section.
pub fn sections<M>(
    text: &str,
    marker: impl Fn(&str) -> Option<M>,
) -> Result<Vec<Section<M>>, ParseError> {
    let markers: Vec<(M, Span)> = line_comments(text)?
        .into_iter()
        .filter_map(|comment| marker(&comment.text).map(|m| (m, comment.span)))
        .collect();
    let ends: Vec<usize> = markers
        .iter()
        .skip(1)
        .map(|(_, span)| span.start)
        .chain(std::iter::once(text.len()))
        .collect();
    Ok(markers
        .into_iter()
        .zip(ends)
        .map(|((marker, marker_span), end)| {
            let span = Span {
                start: marker_span.end,
                end,
            };
            Section {
                marker,
                marker_span,
                span,
                text: keep_only(text, span),
            }
        })
        .collect())
}

/// `text` with every character outside `keep` replaced by spaces (one per byte),
/// newlines kept.
fn keep_only(text: &str, keep: Span) -> String {
    let mut out = String::with_capacity(text.len());
    for (at, ch) in text.char_indices() {
        if (keep.start..keep.end).contains(&at) || ch == '\n' {
            out.push(ch);
        } else {
            out.extend(std::iter::repeat_n(' ', ch.len_utf8()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marker(text: &str) -> Option<&'static str> {
        match text {
            "migrate:up" => Some("up"),
            "migrate:down" => Some("down"),
            _ => None,
        }
    }

    #[test]
    fn markers_cut_the_text_and_positions_stay_the_files() {
        let text = "-- migrate:up\nCREATE TABLE é (a int);\n-- migrate:down\nDROP TABLE é;\n";
        let cut = sections(text, marker).expect("scans");
        assert_eq!(cut.len(), 2);
        assert_eq!(cut[0].marker, "up");
        assert_eq!(cut[0].text.len(), text.len());
        let up = crate::parse(&cut[0].text).expect("parses");
        assert_eq!(up.len(), 1);
        assert_eq!(up[0].text, "CREATE TABLE é (a int)");
        assert_eq!(up[0].position.line, 2);
        let down = crate::parse(&cut[1].text).expect("parses");
        assert_eq!(down[0].text, "DROP TABLE é");
        assert_eq!(down[0].position.line, 4);
    }

    #[test]
    fn a_marker_inside_a_dollar_quoted_body_or_a_string_is_no_marker() {
        let text = "-- migrate:up\nCREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$\n-- migrate:down\nSELECT 1 $$;\nSELECT '\n-- migrate:down\n';\n-- migrate:down\nDROP FUNCTION f();\n";
        let cut = sections(text, marker).expect("scans");
        assert_eq!(cut.len(), 2, "{cut:?}");
        let up = crate::parse(&cut[0].text).expect("parses");
        assert_eq!(up.len(), 2);
        assert!(up[0].text.contains("-- migrate:down\nSELECT 1"));
    }

    #[test]
    fn comments_are_found_by_the_scanner_not_by_text() {
        let comments =
            line_comments("SELECT '--x'; -- real\n/* -- not */ SELECT 1;").expect("scans");
        assert_eq!(comments.len(), 1);
        assert_eq!(comments[0].text, "real");
    }
}
