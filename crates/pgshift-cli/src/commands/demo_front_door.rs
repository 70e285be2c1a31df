//! The front door of `pgshift demo`: `plan` of a few changes against the live relay
//! tables (an index, constraints, the rewrite the demo then runs, a missing table) and
//! `lint` of a risky migration, judged offline with the schema declared.

use pgshift::catalog::DeclaredSchema;
use pgshift::connect::{connect, ConnectionSpec, SessionBudgets};
use pgshift::lint::lint;
use pgshift::plan::PlanInput;
use pgshift::script::{analyze, transaction_mode_for, Knowledge, TransactionMode};
use pgshift_workload::schema::SCHEMA_SQL;

use super::plan::plan_report;
use crate::render;

/// The changes planned before the rewrite (which is planned last).
const CHANGES: &[(&str, &str)] = &[
    (
        "an index on the partitioned events table",
        "CREATE INDEX events_kind_created_idx ON events (kind, created_at);",
    ),
    (
        "a CHECK constraint on channels",
        "ALTER TABLE channels ADD CONSTRAINT channels_ttl_positive CHECK (ttl_seconds > 0);",
    ),
    (
        "a change to a table that does not exist",
        "ALTER TABLE event_archive ADD COLUMN note text;",
    ),
];

/// A risky migration, as a team might write it, for `lint`.
const RISKY_MIGRATION: (&str, &str) = (
    "0042_events_kind_guard.sql",
    "BEGIN;
CREATE FUNCTION events_kind_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.kind < 0 THEN RAISE EXCEPTION 'negative kind %', NEW.kind; END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER events_kind_guard BEFORE INSERT ON events
  FOR EACH ROW EXECUTE FUNCTION events_kind_guard();
CREATE INDEX events_guarded_kind_idx ON events (kind);
UPDATE channels SET ttl_seconds = 3600 WHERE ttl_seconds IS NULL;
ALTER TABLE channels ALTER COLUMN ttl_seconds SET NOT NULL;
COMMIT;
",
);

/// Prints the plan of each change, `rewrite` last, and the lint of the risky
/// migration.
pub(super) async fn show(
    spec: &ConnectionSpec,
    rewrite: &str,
    cas: &pgshift::cas::RunOptions,
) -> Result<(), String> {
    let session = connect(spec, &SessionBudgets::READ_ONLY_PLAN)
        .await
        .map_err(|e| e.to_string())?;
    println!("\n== pgshift plan: how each change would run on the live tables\n");
    let last = ("the rewrite this demo runs next", rewrite);
    for (what, sql) in CHANGES.iter().copied().chain(std::iter::once(last)) {
        println!("-- {what}");
        let input = PlanInput {
            path: "<demo>".to_owned(),
            statements: pgshift_sql::parse(sql).map_err(|e| e.to_string())?,
        };
        let report = plan_report(
            &session,
            vec![input],
            TransactionMode::Statement,
            cas,
            &pgshift::plan::PlanOptions::default(),
        )
        .await
        .map_err(|e| e.to_string())?;
        let text = render::plan(&report, &spec.redacted());
        let body: Vec<&str> = text.lines().filter(|line| line.starts_with("  ")).collect();
        println!("{}\n", body.join("\n"));
    }
    lint_risky_migration()
}

/// `lint` of [`RISKY_MIGRATION`] with the relay schema declared.
fn lint_risky_migration() -> Result<(), String> {
    println!("== pgshift lint: a risky migration, judged offline with the schema declared\n");
    let (name, sql) = RISKY_MIGRATION;
    println!("{}", numbered(sql));
    let mut declared = DeclaredSchema::new();
    declared.absorb(
        &pgshift_sql::parse(&pgshift::source::blank_psql_meta_commands(SCHEMA_SQL))
            .map_err(|e| e.to_string())?,
    );
    let snapshot = declared.snapshot();
    let statements = pgshift_sql::parse(sql).map_err(|e| e.to_string())?;
    let mode = transaction_mode_for(&statements, TransactionMode::File);
    let script = analyze(
        statements,
        mode,
        Knowledge {
            facts: Some(&snapshot),
            server_version_num: None,
            created_earlier: None,
        },
    );
    for finding in lint(&script) {
        let statement = &script.statements[finding.statement].statement.text;
        print!("{}", render::finding(name, &finding, statement));
    }
    Ok(())
}

/// `sql` with line numbers.
fn numbered(sql: &str) -> String {
    sql.lines()
        .enumerate()
        .map(|(n, line)| format!("  {:>2} | {line}", n + 1))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}
