//! `pgshift demo`: a throwaway PostgreSQL with the relay schema, `plan` of a few
//! changes against it, and `lint` of a risky migration; then everything is removed
//! (or kept, with `--keep`).

use std::time::Instant;

use pgshift::catalog::DeclaredSchema;
use pgshift::connect::{connect, ConnectionSpec, SessionBudgets};
use pgshift::lint::lint;
use pgshift::plan::PlanInput;
use pgshift::script::{analyze, transaction_mode_for, Knowledge, TransactionMode};
use pgshift_embedded::{Cluster, ClusterOptions};

use super::plan::plan_report;
use crate::cli::DemoArgs;
use crate::exit;
use crate::render;

/// The relay workload's schema and seed, built into the binary so the demo needs no
/// checkout.
const RELAY_SCHEMA: &str = include_str!("../../../../workloads/relay/schema.sql");
const RELAY_SEED: &str = include_str!("../../../../workloads/relay/seed.sql");

/// The changes the demo plans against the live relay schema.
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
        "a NOT NULL on channels.name",
        "ALTER TABLE channels ALTER COLUMN name SET NOT NULL;",
    ),
    (
        "a rewrite: a new expression for the stored generated search_tsv",
        "ALTER TABLE events DROP COLUMN search_tsv, ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', content)) STORED;",
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

/// Runs `pgshift demo` and returns the exit code.
pub fn run(args: &DemoArgs) -> u8 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("pgshift demo: cannot start the async runtime: {err}");
            return exit::INPUT_ERROR;
        }
    };
    let started = Instant::now();
    step("starting a throwaway PostgreSQL");
    let cluster = match Cluster::start(&ClusterOptions::new().keep_on_exit(args.keep)) {
        Ok(cluster) => cluster,
        Err(err) => {
            eprintln!("pgshift demo: {err}");
            return exit::INPUT_ERROR;
        }
    };
    done(&format!(
        "PostgreSQL {} on {}",
        cluster.version(),
        cluster.socket_dir().display()
    ));
    let outcome = runtime.block_on(demo(&cluster));
    if let Err(message) = &outcome {
        eprintln!("pgshift demo: {message}");
    }
    finish(cluster, args.keep);
    println!(
        "\nDemo finished in {:.1} s.",
        started.elapsed().as_secs_f64()
    );
    if outcome.is_ok() {
        exit::OK
    } else {
        exit::INPUT_ERROR
    }
}

async fn demo(cluster: &Cluster) -> Result<(), String> {
    step("loading the relay schema (partitioned events, 5 triggers) and seeding it");
    let database = "relay";
    cluster
        .psql("postgres", "CREATE DATABASE relay")
        .map_err(|e| e.to_string())?;
    for (name, sql) in [
        ("schema.sql", RELAY_SCHEMA),
        ("seed.sql", RELAY_SEED),
        ("analyze.sql", "ANALYZE;"),
    ] {
        let path = cluster.dir().join(name);
        std::fs::write(&path, sql).map_err(|e| format!("{}: {e}", path.display()))?;
        cluster
            .psql_file(database, &path)
            .map_err(|e| format!("loading {name}: {e}"))?;
    }
    let rows = cluster
        .psql(database, "SELECT count(*) FROM events")
        .map_err(|e| e.to_string())?;
    done(&format!("{} events in 8 partitions", rows.trim()));

    let spec =
        ConnectionSpec::parse(&cluster.connection_string(database)).map_err(|e| e.to_string())?;
    let session = connect(&spec, &SessionBudgets::READ_ONLY_PLAN)
        .await
        .map_err(|e| e.to_string())?;
    println!("\n== pgshift plan: how each change would run on the live tables\n");
    for (what, sql) in CHANGES {
        println!("-- {what}");
        let statements = pgshift_sql::parse(sql).map_err(|e| e.to_string())?;
        let input = PlanInput {
            path: "<demo>".to_owned(),
            statements,
        };
        let report = plan_report(&session, vec![input], TransactionMode::Statement)
            .await
            .map_err(|e| e.to_string())?;
        let text = render::plan(&report, &spec.redacted());
        let body: Vec<&str> = text.lines().filter(|line| line.starts_with("  ")).collect();
        println!("{}\n", body.join("\n"));
    }

    println!("== pgshift lint: a risky migration, judged offline with the schema declared\n");
    let (name, sql) = RISKY_MIGRATION;
    println!("{}", numbered(sql));
    let mut declared = DeclaredSchema::new();
    declared.absorb(
        &pgshift_sql::parse(&pgshift::source::blank_psql_meta_commands(RELAY_SCHEMA))
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

fn numbered(sql: &str) -> String {
    sql.lines()
        .enumerate()
        .map(|(n, line)| format!("  {:>2} | {line}", n + 1))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn finish(cluster: Cluster, keep: bool) {
    if !keep {
        step("stopping and removing the throwaway PostgreSQL");
        match cluster.stop() {
            Ok(()) => done("removed"),
            Err(err) => eprintln!("pgshift demo: {err}"),
        }
        return;
    }
    match cluster.keep() {
        Ok(kept) => {
            println!("\nThe cluster keeps running:");
            println!("  psql \"{}\"", kept.connection_string("relay"));
            println!("  stop it with: {}", kept.stop_command());
            println!("  then remove {}", kept.dir().display());
        }
        Err(err) => eprintln!("pgshift demo: cannot keep the cluster: {err}"),
    }
}

fn step(what: &str) {
    println!("* {what} …");
}

fn done(what: &str) {
    println!("  {what}");
}
