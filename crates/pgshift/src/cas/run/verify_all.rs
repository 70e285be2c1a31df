//! The verification phase: passes of parallel workers until one is clean.
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::Client;

use super::applier_task::ApplierTask;
use super::copy::{ThrottleWatch, Workers};
use super::{CasProgress, RunReport};
use crate::cas::error::CasError;
use crate::cas::plan::RunPlan;
use crate::cas::session;
use crate::cas::statements::Statements;
use crate::cas::store::{self};
use crate::cas::throttle::{Pacer, Throttle};
use crate::cas::verify;
use crate::connect::{ConnectionSpec, Session};

/// More verification sessions once something else is done: `to` sessions in all
/// from when `ready` says so (beside the index builds: the run's workers once the
/// builds are done, whose cores verification then has to itself).
pub(super) struct Grow {
    pub to: usize,
    pub ready: tokio::sync::watch::Receiver<bool>,
}

/// A complete verification pass with no repair and no divergence (INV: CO-7):
/// only that lets the run swap. A pass is verified by `workers` sessions at once, each
/// chunk in one snapshot of its own (the copy's own number of sessions, or fewer
/// beside the index builds, growing to `grow.to` once `grow.ready`: the ranges not yet
/// handed out are then shared among more sessions).
#[allow(clippy::too_many_arguments)]
pub(super) async fn verify_all(
    spec: &ConnectionSpec,
    client: &Client,
    plan: &RunPlan,
    statements: &Statements,
    applier: Option<&ApplierTask>,
    throttle: &Throttle,
    workers: usize,
    mut grow: Option<Grow>,
    estimate: i64,
    report: &mut RunReport,
    progress: &mut dyn CasProgress,
) -> Result<(), CasError> {
    store::set_verified(client, plan.run, false).await?;
    let mut watch = ThrottleWatch::default();
    const MAX_PASSES: u32 = 3;
    let mut sessions = Vec::new();
    for _ in 0..workers.max(1) {
        sessions.push(open_verifier(spec, plan).await?);
    }
    for _ in 0..MAX_PASSES {
        report.verification_passes += 1;
        let pass = Arc::new(verify::Pass::new(
            applier.map(|task| task.held_for_build.clone()),
        ));
        let mut workers = Workers::default();
        let spawn = |workers: &mut Workers, session: &Arc<Session>, index: usize| {
            let (session, statements, pass) = (session.clone(), statements.clone(), pass.clone());
            let repair = plan.options.repair;
            let pace = Pacer::new(throttle.clone(), index);
            workers.spawn(async move {
                verify::worker(session.client(), &statements, &pass, repair, &pace).await
            });
        };
        for (index, session) in sessions.iter().enumerate() {
            spawn(&mut workers, session, index);
        }
        loop {
            // A worker that stopped with an error (a divergence) stops the pass (the
            // others are aborted when `workers` drops).
            let more = workers
                .next(Duration::from_millis(50), "a verification worker")
                .await?;
            let grown = grow.as_ref().filter(|g| more && *g.ready.borrow());
            if let Some(to) = grown.map(|g| g.to) {
                grow = None;
                while sessions.len() < to {
                    let session = open_verifier(spec, plan).await?;
                    spawn(&mut workers, &session, sessions.len());
                    sessions.push(session);
                }
            }
            if let Some(task) = applier {
                task.check()?;
            }
            let notes: Vec<String> = pass
                .notes
                .lock()
                .map(|mut notes| notes.drain(..).collect())
                .unwrap_or_default();
            for note in notes {
                progress.note(&note);
            }
            watch.report(throttle, progress);
            progress.verified(pass.verified.load(Ordering::Relaxed), estimate);
            if !more {
                break;
            }
        }
        report.rows_verified = pass.verified.load(Ordering::Relaxed);
        if !pass.repaired.load(Ordering::Relaxed) {
            // INV: CO-7 — the proof: a complete pass with no repair.
            store::set_verified(client, plan.run, true).await?;
            return Ok(());
        }
    }
    Err(CasError::Divergence(format!(
        "no clean verification pass in {MAX_PASSES} passes"
    )))
}

/// A verification session.
async fn open_verifier(spec: &ConnectionSpec, plan: &RunPlan) -> Result<Arc<Session>, CasError> {
    Ok(Arc::new(
        session::open_evaluating(spec, &plan.names().verify_application(), plan).await?,
    ))
}
