//! What a Rust service does at startup: migrate its database with the migrations
//! embedded in its binary, before it serves anything, and stop if they did not all
//! apply.
//!
//! ```sh
//! DATABASE_URL=postgres://app@localhost/app cargo run -p pgshift --example startup
//! cargo run -p pgshift --example startup -- postgres://app@localhost/app
//! ```
//!
//! Exit codes: 0 every pending migration applied (or none was pending), 2 a migration
//! was refused (nothing of it ran; the refusal says why and what to do), 1 a migration
//! failed or the run could not start. A service that installs a `tracing` subscriber
//! also sees the run's progress as events (target `pgshift::migrator`).

use std::process::ExitCode;

use pgshift::migrate::FileStatus;
use pgshift::{EmbeddedMigrations, MigrateOutcome, Migrator};

/// `startup_migrations/`, a sqlx-layout directory, in the binary.
pub static MIGRATIONS: EmbeddedMigrations =
    pgshift::embed_migrations!("examples/startup_migrations");

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let url = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("DATABASE_URL").ok());
    let Some(url) = url else {
        eprintln!("usage: startup [URL]  (or set DATABASE_URL)");
        return ExitCode::from(1);
    };
    let migrator =
        Migrator::new(&MIGRATIONS).wait_for_other_runner(std::time::Duration::from_secs(600));
    ExitCode::from(migrate(&migrator, &url).await)
}

/// Runs `migrator` on `url`, prints what it did, and returns the exit code.
pub async fn migrate(migrator: &Migrator, url: &str) -> u8 {
    let report = match migrator.run(url).await {
        Ok(report) => report,
        Err(err) => {
            eprintln!("migrations did not run: {err}");
            return 1;
        }
    };
    for file in &report.verdict.files {
        let version = file.version.as_deref().unwrap_or("R");
        let status = match file.status {
            FileStatus::AlreadyApplied => "already applied",
            FileStatus::Applied => "applied",
            FileStatus::AppliedBlocking => "applied (accepted blocking form)",
            FileStatus::Refused => "REFUSED",
            FileStatus::Failed => "FAILED",
            FileStatus::NotRun => "not run",
            FileStatus::Planned => "planned",
        };
        println!("{version} {}: {status}", file.name);
        let refusals = file.schedule.iter().flat_map(|s| &s.refusals);
        for refused in refusals {
            let refusal = &refused.refusal;
            println!(
                "  line {}: {}: {}",
                refused.line, refusal.cause, refusal.message
            );
            println!("  next step: {}", refusal.next_step);
        }
        if let Some(error) = &file.error {
            println!("  {error}");
        }
    }
    match report.outcome() {
        MigrateOutcome::Done | MigrateOutcome::DoneWithBlocking | MigrateOutcome::Planned => {
            let applied = report.applied().count();
            println!("migrations: {applied} applied, nothing pending");
            0
        }
        MigrateOutcome::Refused => {
            println!("migrations: refused; the service does not start");
            2
        }
        MigrateOutcome::Failed => {
            println!("migrations: failed; the service does not start");
            1
        }
    }
}
