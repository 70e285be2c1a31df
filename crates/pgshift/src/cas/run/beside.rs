//! Verification beside the index builds. Once the shadow's key is built,
//! verification reads it while the other indexes are built: each
//! build takes the shadow in SHARE mode (what `CREATE INDEX` takes), which lets reads
//! go on. Verification is mostly reading and hashing, and a build leaves a core idle
//! for long stretches (its leader merging and writing the index alone), so the two
//! together take less time than one after the other. Only for plans whose builds
//! are all plain `CREATE INDEX` and that add no constraint after the copy
//! ([`super::indexes::verifies_beside_builds`]); others build, then verify.
//!
//! What verification proves is unchanged: the rows of the shadow are what the copy
//! and the applier wrote, and a build changes none of them; verification's proof
//! counts only once every build is done. The run's phase is `verifying` from when
//! verification starts (a failure then is recorded there, whichever side failed,
//! and its message says which); a process that resumes a run at `verifying` builds
//! what is left, skipping what was built, and verifies again.
use std::sync::Mutex;
use std::time::Instant;

use tokio_postgres::Client;

use super::applier_task::ApplierTask;
use super::drive::elapsed_ms;
use super::indexes::{analyze_shadow, build_indexes};
use super::verify_all::{verify_all, Grow};
use super::{CasProgress, RunReport};
use crate::cas::copier::CopyState;
use crate::cas::error::CasError;
use crate::cas::index_watch::IndexBuild;
use crate::cas::plan::RunPlan;
use crate::cas::statements::Statements;
use crate::cas::store::{self, Phase};
use crate::cas::throttle::Throttle;
use crate::connect::ConnectionSpec;

/// Verification's sessions beside the builds. A build takes every core while its
/// workers sort (`max_parallel_maintenance_workers`), and leaves one idle while its
/// leader merges and writes the index: one verification session fills that core
/// without crowding the sort. Two did worse than verifying after the builds
/// (`docs/COPY-AND-SWAP.md`, "Verification beside the index builds"). Once the builds
/// are done, verification grows to the run's workers for what is left of its pass.
const BESIDE_WORKERS: usize = 1;

/// One [`CasProgress`] shared by the builds and verification, which run on one task
/// (each call takes it for the call's length only).
struct Shared<'p>(Mutex<&'p mut dyn CasProgress>);

/// A handle on [`Shared`]: a progress of its own for each side.
struct Handle<'s, 'p>(&'s Shared<'p>);

impl Handle<'_, '_> {
    fn with(&self, f: impl FnOnce(&mut dyn CasProgress)) {
        let mut progress = self.0 .0.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut **progress);
    }
}

impl CasProgress for Handle<'_, '_> {
    fn phase(&mut self, phase: Phase) {
        self.with(|p| p.phase(phase));
    }
    fn copied(&mut self, rows: i64, estimate: i64, backlog_max: i64) {
        self.with(|p| p.copied(rows, estimate, backlog_max));
    }
    fn verified(&mut self, rows: i64, estimate: i64) {
        self.with(|p| p.verified(rows, estimate));
    }
    fn note(&mut self, text: &str) {
        self.with(|p| p.note(text));
    }
    fn throttled(&mut self, pace: &str, why: &str, paused_ms: u64) {
        self.with(|p| p.throttled(pace, why, paused_ms));
    }
    fn index_build(&mut self, build: &IndexBuild) {
        self.with(|p| p.index_build(build));
    }
}

/// How long each side took (ms): the builds from the start of the phase, and
/// verification from when the key was built.
pub(super) struct Durations {
    pub indexing: u64,
    pub verifying: u64,
}

/// Builds the shadow's indexes and verifies it beside them. A build that fails stops
/// verification (and the other way round); nothing is proven until both are done.
#[allow(clippy::too_many_arguments)]
pub(super) async fn index_and_verify(
    spec: &ConnectionSpec,
    client: &Client,
    plan: &RunPlan,
    statements: &Statements,
    state: &CopyState,
    applier: Option<&ApplierTask>,
    throttle: &Throttle,
    estimate: i64,
    report: &mut RunReport,
    progress: &mut dyn CasProgress,
) -> Result<Durations, CasError> {
    let shared = Shared(Mutex::new(progress));
    let (readable, mut ready) = tokio::sync::watch::channel(false);
    let (built, builds_done) = tokio::sync::watch::channel(false);
    let started = Instant::now();
    let builds = async {
        let mut progress = Handle(&shared);
        build_indexes(
            spec,
            client,
            plan,
            state,
            applier,
            throttle,
            Some(&readable),
            &mut progress,
        )
        .await?;
        analyze_shadow(spec, plan, throttle).await?;
        built.send_replace(true);
        Ok::<u64, CasError>(elapsed_ms(started))
    };
    let verification = async {
        // The sender lives until both sides are done, so this waits for the key (or
        // for the builds to fail, which drops this side).
        ready
            .wait_for(|ready| *ready)
            .await
            .map_err(|_| CasError::Record("the index builds ended before the key".into()))?;
        let verifying = Instant::now();
        let mut progress = Handle(&shared);
        progress.phase(Phase::Verifying);
        store::set_phase(client, plan.run, Phase::Verifying).await?;
        progress.note(&format!(
            "verifying beside the index builds, from {} ms into the indexing phase",
            elapsed_ms(started)
        ));
        verify_all(
            spec,
            client,
            plan,
            statements,
            applier,
            throttle,
            BESIDE_WORKERS,
            Some(Grow {
                to: plan.options.workers.max(BESIDE_WORKERS),
                ready: builds_done,
            }),
            estimate,
            report,
            &mut progress,
        )
        .await?;
        Ok::<u64, CasError>(elapsed_ms(verifying))
    };
    let (indexing, verifying) = tokio::try_join!(builds, verification)?;
    report.verified_beside_builds = true;
    Ok(Durations {
        indexing,
        verifying,
    })
}
