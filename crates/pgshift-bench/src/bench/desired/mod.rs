//! D1: how long desired state's `pull` and `diff` take on a generated schema
//! ([`schema`]), in rounds.
//!
//! Each round pulls the schema into a new folder, adds a column to a few tables'
//! files there, and diffs the folder against the database, so that the plan is not
//! empty. Both run in a child process (the benchmark executable with the hidden
//! subcommand [`SUBCOMMAND`]), as `pgshift pull` and `pgshift diff` run them:
//! `pgshift::desired::pull`; `pgshift::desired::compare`, then `pgshift::plan` of its
//! statements against the database. The parent reads the child's figures and its
//! peak RSS, as it does for the engine (`super::engine`).

pub mod schema;

use std::path::{Path, PathBuf};
use std::time::Instant;

use pgshift::connect::{connect as pg_connect, ConnectionSpec, SessionBudgets};
use pgshift::desired::{compare, pull, Desired, Fidelity};
use pgshift::plan::PlanInput;
use pgshift::script::TransactionMode;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::engine::{self, EngineChild, CONNINFO_ENV};
use super::results::{ChildProcess, D1Round, DiffFigures, PullFigures, D1};
use super::{connect, Bench, BenchError, BenchResult, Context};

/// The hidden subcommand: `desired-run pull DIR` or `desired-run diff DIR`.
pub const SUBCOMMAND: &str = "desired-run";

/// The database of the benchmark's cluster the schema is generated in.
const DATABASE: &str = "d1";

/// D1 in rounds: the generated schema pulled, edited and diffed in each.
pub(crate) async fn d1(bench: &mut Bench) -> BenchResult<D1> {
    let tables = bench.options.desired_tables;
    let edited = schema::edited(tables, schema::EDITED_TABLES);
    let admin = connect(&bench.conninfo("postgres")).await?;
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {DATABASE}"))
        .await
        .ctx("dropping D1's database")?;
    admin
        .batch_execute(&format!("CREATE DATABASE {DATABASE}"))
        .await
        .ctx("creating D1's database")?;
    bench.say(format!("D1: generating a schema of {tables} tables"));
    let conninfo = bench.conninfo(DATABASE);
    {
        let client = connect(&conninfo).await?;
        for script in schema::scripts(tables) {
            client
                .batch_execute(&script)
                .await
                .ctx("creating D1's schema")?;
        }
    }
    let scratch = Scratch::new()?;
    let mut rounds = Vec::new();
    for round in 1..=bench.options.desired_rounds.max(1) {
        let folder = scratch.0.join(format!("round-{round}"));
        let pull: PullFigures = run_child(bench, &conninfo, round, "pull", &folder).await?;
        edit(&folder, tables, &edited)?;
        let diff: DiffFigures = run_child(bench, &conninfo, round, "diff", &folder).await?;
        expect_added_columns(&diff, edited.len())?;
        rounds.push(D1Round { pull, diff });
    }
    drop(scratch);
    admin
        .batch_execute(&format!("DROP DATABASE {DATABASE}"))
        .await
        .ctx("dropping D1's database")?;
    Ok(D1 {
        schema: schema::SCHEMA.to_owned(),
        tables,
        shape: schema::SHAPE.to_owned(),
        generated_statements: schema::statement_count(tables),
        edited_tables: u32::try_from(edited.len()).unwrap_or(u32::MAX),
        edit: format!(
            "`{}` appended to the column list of the `CREATE TABLE` in the pulled file of each of {} tables, spread evenly",
            schema::ADDED_COLUMN,
            edited.len()
        ),
        pull_median_ms: D1::median(&rounds, |r| r.pull.total_ms),
        diff_median_ms: D1::median(&rounds, |r| r.diff.total_ms),
        rounds,
    })
}

/// Adds [`schema::ADDED_COLUMN`] to the pulled file of each table in `edited`.
fn edit(folder: &Path, tables: u32, edited: &[u32]) -> BenchResult<()> {
    for number in edited {
        let name = schema::table_name(*number, tables);
        let path = folder.join(schema::table_file(&name));
        let text = std::fs::read_to_string(&path).ctx(&format!("reading {}", path.display()))?;
        let text = schema::add_column(&text, &name, schema::ADDED_COLUMN).map_err(BenchError)?;
        std::fs::write(&path, text).ctx(&format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Fails unless the plan adds one column to each edited table and nothing else,
/// and none of it is refused: otherwise the figures would be of another diff.
fn expect_added_columns(diff: &DiffFigures, edited: usize) -> BenchResult<()> {
    if diff.changes == edited && diff.added_columns == edited && diff.refused == 0 {
        return Ok(());
    }
    Err(BenchError(format!(
        "D1: the diff planned {} statements ({} adding a column, {} refused; first: {}), expected {edited} adding a column",
        diff.changes,
        diff.added_columns,
        diff.refused,
        diff.first_change.as_deref().unwrap_or("none")
    )))
}

/// Runs `desired-run STEP FOLDER` to its end and reads its figures, with its wall
/// time and peak RSS; says them on stderr.
async fn run_child<T: DeserializeOwned + Measured>(
    bench: &Bench,
    conninfo: &str,
    round: u32,
    step: &str,
    folder: &Path,
) -> BenchResult<T> {
    let failed = |e: BenchError| BenchError(format!("D1 round {round}, {step}: {e}"));
    let child = EngineChild::spawn_with(
        [SUBCOMMAND.as_ref(), step.as_ref(), folder.as_os_str()],
        &[(CONNINFO_ENV, conninfo)],
    )
    .map_err(failed)?
    .finish()
    .await
    .map_err(failed)?;
    let mut figures: T = serde_json::from_value(child.report().map_err(failed)?.clone())
        .ctx("the child's figures")?;
    *figures.child() = ChildProcess {
        wall_ms: child.wall_ms,
        vm_hwm_kib: child.peak_kib(),
    };
    bench.say(format!("D1 round {round}: {step} {}", figures.summary()));
    Ok(figures)
}

/// Figures the parent completes with what it measured of the child.
trait Measured {
    /// What the benchmark saw of the child process.
    fn child(&mut self) -> &mut ChildProcess;
    /// The figures in a progress line.
    fn summary(&self) -> String;
}

impl Measured for PullFigures {
    fn child(&mut self) -> &mut ChildProcess {
        &mut self.child
    }
    fn summary(&self) -> String {
        format!(
            "{:.2} s (read {:.2} s, proof {:.2} s), {} files, {} statements, {}, peak {} KiB",
            self.total_ms as f64 / 1000.0,
            self.read_ms as f64 / 1000.0,
            self.prove_ms as f64 / 1000.0,
            self.files,
            self.statements,
            self.fidelity,
            self.child.vm_hwm_kib
        )
    }
}

impl Measured for DiffFigures {
    fn child(&mut self) -> &mut ChildProcess {
        &mut self.child
    }
    fn summary(&self) -> String {
        format!(
            "{:.2} s (compare {:.2} s, plan {:.2} s), {} changes, peak {} KiB",
            self.total_ms as f64 / 1000.0,
            self.compare_ms as f64 / 1000.0,
            self.plan_ms as f64 / 1000.0,
            self.changes,
            self.child.vm_hwm_kib
        )
    }
}

/// A folder of this process's own for the rounds' pulled files, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> BenchResult<Self> {
        let dir = std::env::temp_dir().join(format!("pgshift-bench-d1-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).ctx("creating D1's scratch folder")?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The child's side: `pull` into `folder`, or `diff` of `folder`, against the
/// database the environment names; prints one line of JSON and returns the exit
/// code.
pub async fn child_main(step: &str, folder: &Path) -> i32 {
    let started = Instant::now();
    let result = match step {
        "pull" => child_pull(folder).await.and_then(to_value),
        "diff" => child_diff(folder).await.and_then(to_value),
        other => Err(BenchError(format!(
            "{SUBCOMMAND}: unknown step {other:?} (pull or diff)"
        ))),
    };
    engine::print_output(started, result)
}

fn to_value(figures: impl Serialize) -> BenchResult<serde_json::Value> {
    serde_json::to_value(figures).ctx("the figures")
}

async fn child_pull(folder: &Path) -> BenchResult<PullFigures> {
    let conninfo = std::env::var(CONNINFO_ENV).ctx(CONNINFO_ENV)?;
    let pulled = pull(&conninfo, folder).await.ctx("pull")?;
    Ok(PullFigures {
        read_ms: pulled.timings_ms.read_ms,
        prove_ms: pulled.timings_ms.prove_ms,
        total_ms: pulled.timings_ms.total_ms,
        files: pulled.files.len(),
        statements: pulled.files.iter().map(|f| f.statements).sum(),
        fidelity: match pulled.fidelity {
            Fidelity::Exact => "exact".to_owned(),
            Fidelity::AsPgDumpRebuilds { lines, .. } => {
                format!("as-pg-dump-rebuilds ({lines} lines)")
            }
        },
        child: ChildProcess::default(),
    })
}

/// `compare`, then the plan of its statements against the database, as `pgshift
/// diff` runs them.
async fn child_diff(folder: &Path) -> BenchResult<DiffFigures> {
    let conninfo = std::env::var(CONNINFO_ENV).ctx(CONNINFO_ENV)?;
    let started = Instant::now();
    let compared = compare(&conninfo, &Desired::Path(folder.to_owned()), &[])
        .await
        .ctx("diff")?;
    let planning = Instant::now();
    let mut refused = 0;
    if !compared.changes.is_empty() {
        let statements = pgshift_sql::parse(&compared.script()).ctx("the plan's SQL")?;
        let spec = ConnectionSpec::parse(&conninfo).ctx("the connection string")?;
        let session = pg_connect(&spec, &SessionBudgets::READ_ONLY_PLAN)
            .await
            .ctx("connecting to plan")?;
        let input = PlanInput {
            path: "desired-plan.sql".to_owned(),
            statements,
        };
        let plan = pgshift::plan::plan(&session, vec![input], TransactionMode::Statement)
            .await
            .ctx("planning the changes")?;
        refused = plan
            .files
            .iter()
            .flat_map(|f| &f.script.statements)
            .filter(|item| item.classification.route.refusal().is_some())
            .count();
    }
    let plan_ms = elapsed_ms(planning);
    Ok(DiffFigures {
        compare_ms: compared.total_ms,
        plan_ms,
        total_ms: elapsed_ms(started),
        changes: compared.changes.len(),
        added_columns: compared
            .changes
            .iter()
            .filter(|c| c.sql.contains(" ADD COLUMN "))
            .count(),
        destructive: compared.changes.iter().filter(|c| c.destructive).count(),
        refused,
        first_change: compared.changes.first().map(|c| c.sql.clone()),
        child: ChildProcess::default(),
    })
}

fn elapsed_ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_plan_adding_each_edited_column_is_measured() {
        let plan = |changes, added_columns, refused| DiffFigures {
            changes,
            added_columns,
            refused,
            first_change: Some("DROP TABLE app.t0001".to_owned()),
            ..DiffFigures::default()
        };
        assert!(expect_added_columns(&plan(10, 10, 0), 10).is_ok());
        let other = expect_added_columns(&plan(11, 10, 0), 10).expect_err("one more");
        assert!(
            other.to_string().contains("DROP TABLE app.t0001"),
            "{other}"
        );
        assert!(expect_added_columns(&plan(10, 10, 1), 10).is_err());
        assert!(expect_added_columns(&plan(0, 0, 0), 10).is_err());
    }
}
