//! The `pgshift audit` JSON report.

use serde::Serialize;

use crate::audit::{Audit, Finding, TableTriggers};
use crate::catalog::ServerFacts;

/// The whole audit.
#[derive(Clone, Debug, Serialize)]
pub struct AuditReport {
    /// Always [`super::FORMAT_VERSION`].
    pub format_version: u32,
    /// `pgshift`.
    pub tool: &'static str,
    /// pgshift's version.
    pub tool_version: &'static str,
    /// `audit`.
    pub command: &'static str,
    /// The server audited.
    pub server: ServerFacts,
    /// Whether some finding lets a write bypass a trigger (exit code 2).
    pub bypass: bool,
    /// The exit code the CLI returns for it.
    pub exit_code: u8,
    /// Roles that may set `session_replication_role` (and so write as a replica).
    pub replica_role_holders: Vec<String>,
    /// Every table that has triggers, with each trigger's state and where it fires.
    pub tables: Vec<TableTriggers>,
    /// The findings, by table, kind, trigger.
    pub findings: Vec<Finding>,
    /// Counts.
    pub summary: AuditSummary,
}

/// Counts of an audit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AuditSummary {
    /// Tables read (plain, partitioned, foreign; partitions included).
    pub tables_read: usize,
    /// Tables with triggers.
    pub tables_with_triggers: usize,
    /// Triggers (clones included).
    pub triggers: usize,
    /// Findings that let a write bypass a trigger.
    pub bypasses: usize,
    /// Notes.
    pub notes: usize,
}

impl AuditReport {
    /// The report of `audit`, with the exit code the caller returns for it.
    pub fn of(audit: &Audit, exit_code: u8) -> Self {
        let bypasses = audit.findings.iter().filter(|f| f.bypass).count();
        AuditReport {
            format_version: super::FORMAT_VERSION,
            tool: super::TOOL,
            tool_version: super::TOOL_VERSION,
            command: "audit",
            server: audit.server.clone(),
            bypass: audit.has_bypass(),
            exit_code,
            replica_role_holders: audit.replica_role_holders.clone(),
            tables: audit.tables.clone(),
            findings: audit.findings.clone(),
            summary: AuditSummary {
                tables_read: audit.tables_read,
                tables_with_triggers: audit.tables.len(),
                triggers: audit.tables.iter().map(|t| t.triggers.len()).sum(),
                bypasses,
                notes: audit.findings.len() - bypasses,
            },
        }
    }
}
