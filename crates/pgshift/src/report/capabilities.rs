//! The `pgshift capabilities` JSON report.

use serde::Serialize;

use crate::capabilities::{self, Form, MajorSummary};

/// Every statement form pgshift classifies, and how it runs on each supported major.
#[derive(Clone, Debug, Serialize)]
pub struct CapabilitiesReport {
    /// Always [`super::FORMAT_VERSION`].
    pub format_version: u32,
    /// `pgshift`.
    pub tool: &'static str,
    /// pgshift's version (the version `pgshift --version` prints).
    pub tool_version: &'static str,
    /// `capabilities`.
    pub command: &'static str,
    /// The PostgreSQL majors every form was classified for, oldest first.
    pub majors: Vec<u32>,
    /// The form table the matrix is generated from.
    pub source: &'static str,
    /// What the classifier knew: no live facts, so the worst case a live table could
    /// present (as `lint` judges), outside a transaction block.
    pub assumptions: &'static str,
    /// The forms, in the table's order.
    pub forms: Vec<Form>,
    /// How many forms take each route, per major.
    pub summary: Vec<MajorSummary>,
}

impl CapabilitiesReport {
    /// The matrix as a report.
    pub fn generate() -> Result<Self, pgshift_sql::ParseError> {
        let forms = capabilities::matrix()?;
        Ok(CapabilitiesReport {
            format_version: super::FORMAT_VERSION,
            tool: super::TOOL,
            tool_version: super::TOOL_VERSION,
            command: "capabilities",
            majors: capabilities::MAJORS.to_vec(),
            source: capabilities::FORMS_PATH,
            assumptions: capabilities::ASSUMPTIONS,
            summary: capabilities::summary(&forms),
            forms,
        })
    }
}
