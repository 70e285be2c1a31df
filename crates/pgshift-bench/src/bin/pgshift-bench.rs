//! `pgshift-bench`: pgshift's benchmark command. It starts its own throwaway
//! PostgreSQL cluster, runs every comparison side by side on identical tables
//! and writes `results.json`, SVG charts and `results.md` into `--out`.
//!
//! ```sh
//! cargo run --release -p pgshift-bench --bin pgshift-bench -- --out bench-results
//! cargo run --release -p pgshift-bench --bin pgshift-bench -- --quick --out /tmp/bench
//! cargo run --release -p pgshift-bench --bin pgshift-bench -- --only D1 --out docs/bench/d1
//! cargo run --release -p pgshift-bench --bin pgshift-bench -- render --json docs/bench/results.json --chart-prefix docs/bench/
//! ```

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use pgshift_bench::bench::{
    self, desired, engine, markdown, results::BenchResults, BenchOptions, Scenario,
};

#[derive(Parser, Debug)]
#[command(
    name = "pgshift-bench",
    version,
    about = "pgshift's benchmarks: side-by-side comparisons on identical tables in one run on a throwaway cluster",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Writes the markdown section (and draws the charts again) from a
    /// results.json.
    Render {
        /// The results.json of a run.
        #[arg(long)]
        json: PathBuf,
        /// Where to draw the charts (default: beside the JSON).
        #[arg(long)]
        charts: Option<PathBuf>,
        /// Prefix of the chart links in the markdown.
        #[arg(long, default_value = "")]
        chart_prefix: String,
        /// Write the markdown here instead of to stdout.
        #[arg(long)]
        markdown: Option<PathBuf>,
    },
    /// (internal) Runs one copy-and-swap in this process and prints its report
    /// as JSON: the benchmark measures the engine in a child process.
    #[command(name = "engine-run", hide = true)]
    EngineRun {
        /// The table.
        #[arg(long)]
        table: String,
        /// The statement.
        #[arg(long)]
        sql: String,
    },
    /// (internal) Runs desired state's pull into DIR, or its diff of DIR, in this
    /// process and prints its figures as JSON: D1 measures them in a child process.
    #[command(name = "desired-run", hide = true)]
    DesiredRun {
        /// pull or diff.
        #[arg(value_parser = ["pull", "diff"])]
        step: String,
        /// The folder pulled into, or diffed.
        dir: PathBuf,
    },
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Where results.json, the SVG charts and results.md go.
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
    /// Small sizes for a smoke run (about two minutes).
    #[arg(long)]
    quick: bool,
    /// Rows of each P1/P2 table [default: 2000000; quick: 100000].
    #[arg(long)]
    rows: Option<u64>,
    /// Rows of each table of P1's larger size (0: P1 at --rows only)
    /// [default: 10000000; quick: 300000].
    #[arg(long)]
    p1_large_rows: Option<u64>,
    /// Rounds of P1 (at each size) and of P2, alternating which side runs first;
    /// each reports its median round [default: 3; quick: 1].
    #[arg(long)]
    rounds: Option<u32>,
    /// Rounds of P3's runs with the default and with the stricter throttle, each on
    /// its own copy of the database; each setting reports its median round
    /// [default: 3; quick: 1].
    #[arg(long)]
    p3_rounds: Option<u32>,
    /// `--max-writer-slowdown` (a ratio over the probe's baseline) of P3's run with
    /// the stricter throttle (the default throttle's is 2).
    #[arg(long, default_value_t = 1.5)]
    strict_writer_slowdown: f64,
    /// Rows of P6's small table [default: rows / 10].
    #[arg(long)]
    small_rows: Option<u64>,
    /// Seed rows per partition of the relay's events (8 partitions)
    /// [default: 50000; quick: 2000].
    #[arg(long)]
    relay_rows_per_partition: Option<u32>,
    /// The relay writers' rate for P3/P4, per second (P7 runs at twice this).
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    /// Seconds of load before each relay change [default: 12; quick: 4].
    #[arg(long)]
    before: Option<u64>,
    /// Seconds of load after each relay change [default: 8; quick: 3].
    #[arg(long)]
    after: Option<u64>,
    /// Seconds of each P5 throughput measurement [default: 10; quick: 3].
    #[arg(long)]
    p5_seconds: Option<u64>,
    /// Tables of D1's generated schema [default: 1000; quick: 50].
    #[arg(long)]
    desired_tables: Option<u32>,
    /// Rounds of D1 (pull, edit, diff) [default: 3; quick: 1].
    #[arg(long)]
    desired_rounds: Option<u32>,
    /// Only these scenarios, comma-separated (P1,P2,P3,P5,P6,P7,P8,D1; P4 comes with P3).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// PostgreSQL's bin directory [default: PGSHIFT_PG_BIN, pg_config, /usr/lib/postgresql/*/bin].
    #[arg(long)]
    pg_bin: Option<PathBuf>,
    /// Copy workers of every pgshift run.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Chunk target duration of every pgshift run, ms.
    #[arg(long, default_value_t = 500)]
    chunk_ms: u64,
    /// How every pgshift run verifies: digest or exact.
    #[arg(long, default_value = "digest", value_parser = ["digest", "exact"])]
    verify: String,
}

impl RunArgs {
    fn options(&self, args: Vec<String>) -> Result<BenchOptions, String> {
        let mut o = if self.quick {
            BenchOptions::quick(&self.out)
        } else {
            BenchOptions::standard(&self.out)
        };
        if let Some(rows) = self.rows {
            o.rows = rows;
            o.small_rows = (rows / 10).max(1);
        }
        if let Some(rows) = self.p1_large_rows {
            o.p1_large_rows = rows;
        }
        if let Some(rounds) = at_least_one(self.rounds, "--rounds")? {
            o.pair_rounds = rounds;
        }
        if let Some(rounds) = at_least_one(self.p3_rounds, "--p3-rounds")? {
            o.p3_rounds = rounds;
        }
        if !(self.strict_writer_slowdown.is_finite() && self.strict_writer_slowdown > 1.0) {
            return Err(format!(
                "--strict-writer-slowdown must be a ratio over 1, not {}",
                self.strict_writer_slowdown
            ));
        }
        o.strict_writer_slowdown = self.strict_writer_slowdown;
        if let Some(small) = self.small_rows {
            o.small_rows = small;
        }
        if let Some(n) = self.relay_rows_per_partition {
            o.relay_rows_per_partition = n;
        }
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return Err(format!("--rate must be positive, not {}", self.rate));
        }
        o.rate = self.rate;
        if let Some(s) = self.before {
            o.before_s = s;
        }
        if let Some(s) = self.after {
            o.after_s = s;
        }
        if let Some(s) = self.p5_seconds {
            o.p5_seconds = s.max(1);
        }
        if let Some(tables) = self.desired_tables {
            o.desired_tables = tables;
        }
        if let Some(rounds) = at_least_one(self.desired_rounds, "--desired-rounds")? {
            o.desired_rounds = rounds;
        }
        if !self.only.is_empty() {
            let mut only = BTreeSet::new();
            for name in &self.only {
                only.insert(
                    Scenario::parse(name)
                        .ok_or_else(|| format!("--only: unknown scenario {name:?}"))?,
                );
            }
            o.only = only;
        }
        if o.rows == 0
            || o.small_rows == 0
            || o.relay_rows_per_partition == 0
            || o.desired_tables == 0
        {
            return Err("sizes must be at least 1".to_owned());
        }
        if self.workers == 0 {
            return Err("--workers must be at least 1".to_owned());
        }
        o.pg_bin = self.pg_bin.clone();
        o.workers = self.workers;
        o.chunk_target_ms = self.chunk_ms.max(1);
        o.verify = if self.verify == "exact" {
            pgshift::cas::VerifyMethod::Exact
        } else {
            pgshift::cas::VerifyMethod::Digest
        };
        o.args = args;
        Ok(o)
    }
}

/// `count`, refused when it is 0.
fn at_least_one(count: Option<u32>, flag: &str) -> Result<Option<u32>, String> {
    match count {
        Some(0) => Err(format!("{flag} must be at least 1")),
        other => Ok(other),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cli = Cli::parse();
    match cli.command {
        Some(Command::EngineRun { table, sql }) => {
            ExitCode::from(engine::child_main(&table, &sql).await.clamp(0, 255) as u8)
        }
        Some(Command::DesiredRun { step, dir }) => {
            ExitCode::from(desired::child_main(&step, &dir).await.clamp(0, 255) as u8)
        }
        Some(Command::Render {
            json,
            charts,
            chart_prefix,
            markdown: target,
        }) => match render(&json, charts, &chart_prefix, target) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("pgshift-bench render: {e}");
                ExitCode::FAILURE
            }
        },
        None => {
            let options = match cli.run.options(args) {
                Ok(options) => options,
                Err(e) => {
                    eprintln!("pgshift-bench: {e}");
                    return ExitCode::from(2);
                }
            };
            match bench::run(options).await {
                Ok(results) => {
                    print!("{}", markdown::render(&results, ""));
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("pgshift-bench: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

fn render(
    json: &std::path::Path,
    charts: Option<PathBuf>,
    chart_prefix: &str,
    target: Option<PathBuf>,
) -> Result<(), String> {
    let text = std::fs::read_to_string(json).map_err(|e| format!("{}: {e}", json.display()))?;
    let results: BenchResults =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", json.display()))?;
    if results.schema_version != bench::results::SCHEMA_VERSION {
        return Err(format!(
            "{} has schema version {}, this tool writes {}",
            json.display(),
            results.schema_version,
            bench::results::SCHEMA_VERSION
        ));
    }
    let charts = charts.unwrap_or_else(|| {
        json.parent()
            .map(std::path::Path::to_path_buf)
            .unwrap_or_default()
    });
    bench::draw_charts(&charts, &results).map_err(|e| e.to_string())?;
    let text = markdown::render(&results, chart_prefix);
    match target {
        Some(path) => std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display())),
        None => {
            print!("{text}");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(args: &[&str]) -> Result<BenchOptions, String> {
        let cli = Cli::try_parse_from(std::iter::once("pgshift-bench").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        cli.run
            .options(args.iter().map(|a| (*a).to_owned()).collect())
    }

    #[test]
    fn defaults_quick_and_overrides() {
        let standard = options(&[]).expect("defaults");
        assert_eq!((standard.rows, standard.small_rows), (2_000_000, 200_000));
        assert!(!standard.quick);
        assert_eq!(standard.only.len(), Scenario::ALL.len());
        let quick = options(&["--quick", "--out", "/tmp/x"]).expect("quick");
        assert!(quick.quick);
        assert!(quick.rows < standard.rows);
        assert_eq!(quick.out, PathBuf::from("/tmp/x"));
        assert_eq!(quick.args, vec!["--quick", "--out", "/tmp/x"]);
        let custom =
            options(&["--rows", "500000", "--only", "p1,P4", "--rate", "100"]).expect("custom");
        assert_eq!((custom.rows, custom.small_rows), (500_000, 50_000));
        assert_eq!(
            custom.only.into_iter().collect::<Vec<_>>(),
            vec![Scenario::P1, Scenario::P3]
        );
        assert_eq!(custom.rate, 100.0);
        assert_eq!(
            (standard.desired_tables, standard.desired_rounds),
            (1_000, 3)
        );
        assert!(quick.desired_tables < standard.desired_tables);
        let d1 = options(&[
            "--only",
            "d1",
            "--desired-tables",
            "200",
            "--desired-rounds",
            "5",
        ])
        .expect("D1 alone");
        assert_eq!(d1.only.into_iter().collect::<Vec<_>>(), vec![Scenario::D1]);
        assert_eq!((d1.desired_tables, d1.desired_rounds), (200, 5));
    }

    #[test]
    fn bad_arguments_are_refused() {
        assert!(options(&["--only", "P9"]).unwrap_err().contains("P9"));
        assert!(options(&["--rate", "0"]).is_err());
        assert!(options(&["--rows", "0"]).is_err());
        assert!(options(&["--workers", "0"]).is_err());
        assert!(options(&["--desired-tables", "0"]).is_err());
        assert!(options(&["--desired-rounds", "0"])
            .unwrap_err()
            .contains("--desired-rounds"));
    }

    #[test]
    fn the_child_subcommands_are_hidden_but_parse() {
        let cli = Cli::try_parse_from([
            "pgshift-bench",
            "engine-run",
            "--table",
            "t",
            "--sql",
            "VACUUM FULL t",
        ])
        .expect("parses");
        assert!(matches!(cli.command, Some(Command::EngineRun { .. })));
        let cli = Cli::try_parse_from(["pgshift-bench", "desired-run", "diff", "/tmp/d1"])
            .expect("parses");
        assert!(
            matches!(&cli.command, Some(Command::DesiredRun { step, dir }) if step == "diff" && dir == &PathBuf::from("/tmp/d1"))
        );
        assert!(Cli::try_parse_from(["pgshift-bench", "desired-run", "push", "/tmp/d1"]).is_err());
        use clap::CommandFactory;
        let help = Cli::command().render_help().to_string();
        assert!(!help.contains("engine-run"), "{help}");
        assert!(!help.contains("desired-run"), "{help}");
        assert!(help.contains("render"));
    }
}
