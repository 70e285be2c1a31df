//! `pgshift capabilities` for people: one row per form and group of majors.
//!
//! ```text
//! PG     ROUTE                    WORK          LOCK              TRANSACTION  STATEMENT FORM
//! 14-18  native                   catalog-only  ACCESS EXCLUSIVE  any          ALTER TABLE events ADD COLUMN note text
//! 14-17  refused: server-too-old  catalog-only  ACCESS EXCLUSIVE  any          ALTER TABLE events ADD COLUMN … VIRTUAL
//! 18     native                   catalog-only  ACCESS EXCLUSIVE  any            (the form above)
//! ```

use std::fmt::Write;

use pgshift::capabilities::Outcome;
use pgshift::report::CapabilitiesReport;
use serde::Serialize;

use super::style::{paint, Tone};

/// Longest statement text shown; longer ones end in `…` (`--format json` has them whole).
const FORM_WIDTH: usize = 80;

/// The whole matrix.
pub fn capabilities(report: &CapabilitiesReport) -> String {
    let mut rows: Vec<[String; 6]> = Vec::new();
    for form in &report.forms {
        for (index, outcome) in form.outcomes.iter().enumerate() {
            let text = if index == 0 {
                shorten(&form.sql)
            } else {
                "  (the form above)".to_owned()
            };
            rows.push([
                majors(&outcome.majors),
                route(outcome),
                name(&outcome.work),
                outcome
                    .lock
                    .map_or_else(|| "-".to_owned(), |mode| mode.sql_name().to_owned()),
                name(&outcome.transaction),
                text,
            ]);
        }
    }
    let header = [
        "PG",
        "ROUTE",
        "WORK",
        "LOCK",
        "TRANSACTION",
        "STATEMENT FORM",
    ]
    .map(str::to_owned);
    let mut widths = [0usize; 5];
    for row in rows.iter().chain([&header]) {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |row: &[String; 6]| {
        let mut out = String::new();
        for (width, cell) in widths.iter().zip(row) {
            let _ = write!(out, "{cell:<width$}  ");
        }
        out.push_str(&row[5]);
        out
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} statement forms on PostgreSQL {}, as the classifier answers offline ({})",
        report.forms.len(),
        majors(&report.majors),
        report.source
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "{}", paint(Tone::Heading, &line(&header)));
    for row in &rows {
        let _ = writeln!(out, "{}", line(row).trim_end());
    }
    let _ = writeln!(out);
    for summary in &report.summary {
        let _ = writeln!(
            out,
            "PostgreSQL {}: {} native, {} native sequence, {} copy-and-swap, {} refused",
            summary.major,
            summary.native,
            summary.native_sequence,
            summary.copy_and_swap,
            summary.refused
        );
    }
    let _ = writeln!(
        out,
        "Judged {}. `pgshift plan` judges a statement with the live table's facts; `--format json` lists the steps of each native sequence.",
        report.assumptions.split(';').next().unwrap_or(report.assumptions)
    );
    out
}

/// `14-18` for a run of majors, `14, 16` otherwise.
fn majors(majors: &[u32]) -> String {
    match (majors.first(), majors.last()) {
        (Some(first), Some(last))
            if majors.len() > 1 && last - first + 1 == majors.len() as u32 =>
        {
            format!("{first}-{last}")
        }
        _ => majors
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

fn route(outcome: &Outcome) -> String {
    match outcome.refusal {
        Some(cause) => format!("{}: {cause}", outcome.route),
        None => outcome.route.to_owned(),
    }
}

/// A closed-vocabulary value by the name the JSON gives it (`catalog-only`).
fn name<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|value| value.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn shorten(sql: &str) -> String {
    let flat = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= FORM_WIDTH {
        return flat;
    }
    let mut short: String = flat.chars().take(FORM_WIDTH - 1).collect();
    short.push('…');
    short
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majors_are_a_range_when_consecutive() {
        assert_eq!(majors(&[14, 15, 16, 17, 18]), "14-18");
        assert_eq!(majors(&[18]), "18");
        assert_eq!(majors(&[14, 16]), "14, 16");
    }

    #[test]
    fn every_form_and_major_has_a_row() {
        let report = CapabilitiesReport::generate().expect("generates");
        let text = capabilities(&report);
        let outcomes: usize = report.forms.iter().map(|f| f.outcomes.len()).sum();
        // Title, blank, header; rows; blank, one line per major, the closing note.
        assert_eq!(
            text.lines().count(),
            3 + outcomes + 1 + report.majors.len() + 1
        );
        assert!(text.contains("refused: server-too-old"), "{text}");
        assert!(
            text.contains("ALTER TABLE events ADD COLUMN note text"),
            "{text}"
        );
    }

    #[test]
    fn long_forms_are_shortened() {
        let long = "SELECT ".repeat(30);
        let short = shorten(&long);
        assert_eq!(short.chars().count(), FORM_WIDTH);
        assert!(short.ends_with('…'));
    }
}
