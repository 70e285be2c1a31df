//! One case (a shape × a statement): seed a template database once per shape, clone
//! it twice with `CREATE DATABASE … TEMPLATE`, run the statement natively on one and
//! through pgshift's `plan` + `exec::apply` (as `pgshift apply` routes it) on the
//! other, and compare the two snapshots.

use std::time::{Duration, Instant};

use pgshift::cas::Mode;
use pgshift::connect::{connect, ConnectionSpec, SessionBudgets};
use pgshift::exec::{
    apply, ApplyOptions, ApplyVerdict, CasSettings, NoProgress, Outcome, Sessions, StepBudgets,
    TokioSleeper,
};
use pgshift::plan::{plan_with, PlanInput, PlanOptions};
use pgshift::refusal::RefusalCause;
use pgshift::script::TransactionMode;
use tokio_postgres::{Client, NoTls};

use super::allowance::{self, Allowance};
use super::shape::Shape;
use super::snapshot::{self, Snapshot};
use super::statement::Form;
use crate::common::cluster;

/// What pgshift did with a statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pgshift {
    /// Done; `cas` when through copy-and-swap.
    Done { cas: bool },
    /// Refused before anything committed.
    Refused {
        cause: RefusalCause,
        message: String,
    },
    /// Failed after starting.
    Failed(String),
}

/// How a case ended.
#[derive(Clone, Debug)]
pub enum Verdict {
    /// Both ran; the snapshots are equal (up to the allowances named).
    Same {
        cas: bool,
        allowed: Vec<&'static str>,
    },
    /// PostgreSQL ran the statement; pgshift refused it as documented.
    RefusedAsDocumented(RefusalCause),
    /// PostgreSQL rejected the statement (SQLSTATE); so did pgshift, changing nothing.
    BothRejected(String),
    /// A difference nobody intended (the message says what).
    Differs(String),
}

/// A case's result.
#[derive(Clone, Debug)]
pub struct CaseResult {
    pub shape: usize,
    pub form: Form,
    pub verdict: Verdict,
    pub elapsed: Duration,
}

/// Test budgets of pgshift's native steps.
const BUDGETS: StepBudgets = StepBudgets {
    lock_timeout_ms: 2_000,
    weak_lock_timeout_ms: 30_000,
    statement_timeout_ms: 60_000,
    build_timeout_ms: 60_000,
    max_attempts: 5,
    backoff_initial_ms: 50,
    backoff_max_ms: 500,
};

/// The connection string of `db` as `role` (the superuser when `None`).
pub fn conninfo(db: &str, role: Option<&str>) -> String {
    let base = cluster().connection_string(db);
    match role {
        Some(role) => base.replace(
            &format!("user={}", cluster().superuser()),
            &format!("user={role}"),
        ),
        None => base,
    }
}

/// A plain client of `db` as `role`.
pub async fn client_as(db: &str, role: Option<&str>) -> Result<Client, String> {
    let (client, connection) = tokio_postgres::connect(&conninfo(db, role), NoTls)
        .await
        .map_err(|e| format!("connecting to {db}: {e}"))?;
    tokio::spawn(connection);
    Ok(client)
}

fn db_error(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}

/// Runs SQL on the `postgres` database as the superuser.
pub async fn admin(sql: &str) -> Result<(), String> {
    let client = client_as("postgres", None).await?;
    client.batch_execute(sql).await.map_err(|e| db_error(&e))
}

/// Clones `template` into `name` (nobody is connected to the template). From
/// PostgreSQL 15 the files are copied (`STRATEGY FILE_COPY`, as before 15): for small
/// databases it costs the server a third less than WAL-logging every block.
pub async fn clone(template: &str, name: &str, shape: &Shape, version: i32) -> Result<(), String> {
    let strategy = if version >= 150000 {
        " STRATEGY FILE_COPY"
    } else {
        ""
    };
    admin(&format!(
        "CREATE DATABASE \"{name}\" TEMPLATE \"{template}\"{strategy}"
    ))
    .await?;
    if let Some(role) = shape.runner() {
        // Database privileges are not copied from the template.
        admin(&format!("GRANT CREATE ON DATABASE \"{name}\" TO {role}")).await?;
    }
    Ok(())
}

/// Drops a database (ending any session still in it).
pub async fn drop_database(name: &str) {
    let _ = admin(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")).await;
}

/// The snapshot of `db`.
pub async fn snapshot_of(db: &str, version: i32) -> Result<Snapshot, String> {
    let client = client_as(db, None).await?;
    snapshot::read(&client, version)
        .await
        .map_err(|e| format!("snapshot of {db}: {}", db_error(&e)))
}

/// The snapshot of `db` with `mask`, its catalog that of `unmasked` (read from `db`).
async fn masked_snapshot_of(
    db: &str,
    unmasked: &Snapshot,
    mask: (&str, &str, snapshot::Mask),
) -> Result<Snapshot, String> {
    let client = client_as(db, None).await?;
    snapshot::read_masked(&client, unmasked, mask)
        .await
        .map_err(|e| format!("snapshot of {db}: {}", db_error(&e)))
}

/// Runs `sql` as `pgshift apply` would: plan against the live catalog, then apply,
/// with copy-and-swap available.
pub async fn through_pgshift(db: &str, role: Option<&str>, sql: &str) -> Result<Pgshift, String> {
    let spec = ConnectionSpec::parse(&conninfo(db, role)).map_err(|e| e.to_string())?;
    let budgets = SessionBudgets {
        lock_timeout_ms: 2_000,
        statement_timeout_ms: 60_000,
        idle_in_transaction_timeout_ms: 60_000,
    };
    let session = connect(&spec, &budgets).await.map_err(|e| e.to_string())?;
    let statements = pgshift_sql::parse(sql).map_err(|e| e.to_string())?;
    // A shape that runs as its table's owner (`roleruns`) cannot measure free disk:
    // the room is the operator's to give, as `--disk-room` does.
    let disk_room = role.map(|_| 1u64 << 30);
    let planned = plan_with(
        &session,
        vec![PlanInput {
            path: "<differential>".to_owned(),
            statements,
        }],
        TransactionMode::Statement,
        &PlanOptions {
            disk_room,
            ..PlanOptions::default()
        },
    )
    .await
    .map_err(|e| format!("plan: {e}"))?;
    let sessions = Sessions {
        main: session.client(),
        monitor: None,
        user_search_path: session.user_search_path(),
    };
    let mut run_options = crate::common::cas::options(Mode::Live);
    // One copy worker: 120 rows need no more, and every session costs the machine.
    run_options.workers = 1;
    run_options.cutover.lock_timeout_ms = 2_000;
    run_options.disk_room = disk_room;
    let options = ApplyOptions {
        max_table_size: None,
        budgets: BUDGETS,
        allow_blocking: Vec::new(),
        copy_and_swap: Some(CasSettings {
            spec: spec.clone(),
            options: run_options,
            standbys: Vec::new(),
        }),
    };
    let file = planned
        .files
        .first()
        .ok_or_else(|| "plan returned no file".to_owned())?;
    let verdict = apply(
        &sessions,
        &file.script,
        &options,
        &TokioSleeper,
        &mut NoProgress,
    )
    .await;
    Ok(judge(&verdict))
}

fn judge(verdict: &ApplyVerdict) -> Pgshift {
    let cas = verdict.units.iter().any(|u| u.copy_and_swap.is_some());
    let unit_refusal = verdict
        .units
        .iter()
        .find_map(|u| u.copy_and_swap.as_ref().and_then(|c| c.refusal.clone()));
    let refusal = verdict
        .refusals
        .first()
        .map(|r| r.refusal.clone())
        .or_else(|| verdict.runtime_refusal.clone())
        .or(unit_refusal);
    match verdict.outcome {
        Outcome::Done | Outcome::DoneWithBlocking => Pgshift::Done { cas },
        Outcome::Refused => match refusal {
            Some(r) => Pgshift::Refused {
                cause: r.cause,
                message: r.message,
            },
            None => Pgshift::Failed(format!("refused without a refusal: {verdict:?}")),
        },
        Outcome::Failed => {
            let failure = verdict
                .units
                .iter()
                .find_map(|u| {
                    u.copy_and_swap
                        .as_ref()
                        .and_then(|c| c.error.clone())
                        .or_else(|| u.report.as_ref().and_then(|r| r.failure.clone()))
                })
                .unwrap_or_else(|| format!("{verdict:?}"));
            match refusal {
                Some(r) => Pgshift::Refused {
                    cause: r.cause,
                    message: format!("{} ({failure})", r.message),
                },
                None => Pgshift::Failed(failure),
            }
        }
    }
}

/// Everything a case needs.
pub struct Case<'a> {
    pub shape_index: usize,
    pub shape: &'a Shape,
    pub form: Form,
    pub sql: String,
    pub template: &'a str,
    /// A clone of the template where native statements run in a transaction that is
    /// rolled back (one at a time: the lock guards it).
    pub native: &'a tokio::sync::Mutex<String>,
    /// The template's snapshot (what "nothing changed" means).
    pub before: &'a Snapshot,
    pub version: i32,
}

/// What the native statement did.
struct Native {
    /// `Err` with PostgreSQL's message and SQLSTATE when it rejected the statement.
    result: Result<(), String>,
    /// The snapshot afterwards, and with the form's column masked (when it has one).
    snapshot: Option<(Snapshot, Option<Snapshot>)>,
    /// How the writes through the views ended, when PostgreSQL refused them (its
    /// message and SQLSTATE); taken before the snapshot.
    writes: Option<String>,
}

/// Settings the runner's role gets at login (`ALTER ROLE … SET`), as `SET LOCAL`s.
const ROLE_SETTINGS: &str =
    "SELECT set_config(split_part(x, '=', 1), substr(x, strpos(x, '=') + 1), true) \
      FROM pg_db_role_setting s, unnest(s.setconfig) x \
     WHERE s.setdatabase = 0 AND s.setrole = (SELECT oid FROM pg_roles WHERE rolname = $1)";

/// Every user sequence's state, as the `setval` calls that put it back.
const SEQUENCE_STATES: &str = "SELECT format('SELECT setval(%L, %s, %s)', format('%I.%I', n.nspname, c.relname), \
        (xpath('/row/last_value/text()', x))[1]::text, (xpath('/row/is_called/text()', x))[1]::text) \
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace, \
           LATERAL query_to_xml(format('SELECT last_value, is_called FROM %I.%I', n.nspname, c.relname), false, true, '') x \
     WHERE c.relkind = 'S' AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pgshift')";

/// Forms PostgreSQL does not run inside a transaction block on `shape`; and every
/// form on a shape with views to write through, which natively run after the
/// statement commits, in a session of their own, as pgshift's side runs them (inside
/// the rolled-back transaction, after some statements on tables with exclusion
/// constraints, an `INSERT` through an `INSTEAD OF` trigger view was seen to fail on
/// the table's key, in PostgreSQL 15 itself).
fn needs_own_clone(form: Form, shape: &Shape) -> bool {
    form == Form::VacuumFull
        || (form == Form::Cluster && shape.partitioned())
        || shape.view_ties.behaviour_sql(shape).is_some()
}

impl Case<'_> {
    fn name(&self, side: &str) -> String {
        format!(
            "{}_{}_{side}",
            self.template,
            self.form.name().replace('-', "_")
        )
    }

    /// Runs the case and removes its databases (unless `PGSHIFT_DIFF_KEEP` is set).
    pub async fn run(&self) -> CaseResult {
        let started = Instant::now();
        let (native, shifted) = (self.name("n"), self.name("s"));
        let verdict = match self.compare(&native, &shifted).await {
            Ok(verdict) => verdict,
            Err(e) => Verdict::Differs(format!("harness: {e}")),
        };
        if std::env::var_os("PGSHIFT_DIFF_KEEP").is_none() {
            drop_database(&native).await;
            drop_database(&shifted).await;
        }
        CaseResult {
            shape: self.shape_index,
            form: self.form,
            verdict,
            elapsed: started.elapsed(),
        }
    }

    /// Runs `sql` natively as the shape's runner and reads the snapshot afterwards:
    /// in a rolled-back transaction on the shared native clone, or on a clone of its
    /// own where PostgreSQL refuses a transaction block.
    async fn native(&self, own_clone: &str, sql: &str) -> Result<Native, String> {
        let mask = allowance::mask(self.form);
        let role = self.shape.runner();
        if needs_own_clone(self.form, self.shape) {
            clone(self.template, own_clone, self.shape, self.version).await?;
            let client = client_as(own_clone, role).await?;
            let result = client.batch_execute(sql).await.map_err(|e| db_error(&e));
            drop(client);
            let mut writes = None;
            let snapshot = match result {
                Ok(()) => {
                    writes = self
                        .write_through_views(&client_as(own_clone, None).await?)
                        .await;
                    let raw = snapshot_of(own_clone, self.version).await?;
                    let masked = match mask {
                        Some(m) => Some(masked_snapshot_of(own_clone, &raw, m).await?),
                        None => None,
                    };
                    Some((raw, masked))
                }
                Err(_) => None,
            };
            return Ok(Native {
                result,
                snapshot,
                writes,
            });
        }
        let db = self.native.lock().await;
        let client = client_as(&db, None).await?;
        let restore: Vec<String> = client
            .query(SEQUENCE_STATES, &[])
            .await
            .map_err(|e| db_error(&e))?
            .iter()
            .map(|row| row.get(0))
            .collect();
        client
            .batch_execute("BEGIN")
            .await
            .map_err(|e| db_error(&e))?;
        if let Some(role) = role {
            client
                .query(ROLE_SETTINGS, &[&role])
                .await
                .map_err(|e| db_error(&e))?;
            client
                .batch_execute(&format!("SET LOCAL ROLE {role}"))
                .await
                .map_err(|e| db_error(&e))?;
        }
        let result = client.batch_execute(sql).await.map_err(|e| db_error(&e));
        let snapshot = match result {
            Ok(()) => {
                client
                    .batch_execute("RESET ROLE")
                    .await
                    .map_err(|e| db_error(&e))?;
                let raw = snapshot::read(&client, self.version)
                    .await
                    .map_err(|e| db_error(&e))?;
                let masked = match mask {
                    Some(m) => Some(
                        snapshot::read_masked(&client, &raw, m)
                            .await
                            .map_err(|e| db_error(&e))?,
                    ),
                    None => None,
                };
                Some((raw, masked))
            }
            Err(_) => None,
        };
        client
            .batch_execute("ROLLBACK")
            .await
            .map_err(|e| db_error(&e))?;
        for setval in restore {
            client
                .batch_execute(&setval)
                .await
                .map_err(|e| db_error(&e))?;
        }
        Ok(Native {
            result,
            snapshot,
            writes: None,
        })
    }

    async fn compare(&self, native_db: &str, shifted: &str) -> Result<Verdict, String> {
        clone(self.template, shifted, self.shape, self.version).await?;
        let mut native = self.native(native_db, &self.sql).await?;
        let pgshift = through_pgshift(shifted, self.shape.runner(), &self.sql).await?;
        let mut allowed = Vec::new();
        if let (Err(rejected), Pgshift::Done { .. }) = (&native.result, &pgshift) {
            // PostgreSQL refuses a change of a column that a view or a trigger's column
            // list uses; copy-and-swap recreates them on the new table. The oracle is
            // then the statement with those dependents dropped first and made again.
            if let Some(fallback) =
                allowance::dependents_recreated(self.shape, self.form, self.version, rejected)
            {
                drop_database(native_db).await;
                native = self
                    .native(native_db, &fallback.replace("{statement}", &self.sql))
                    .await?;
                allowed.push(allowance::DEPENDENTS_RECREATED);
            }
        }
        match (&native.result, pgshift) {
            (Ok(()), Pgshift::Done { cas }) => {
                let (raw, masked) = native.snapshot.ok_or("no native snapshot")?;
                let writes = self
                    .write_through_views(&client_as(shifted, None).await?)
                    .await;
                if writes != native.writes {
                    return Ok(Verdict::Differs(format!(
                        "writes through the views: natively {}, after pgshift {}",
                        native.writes.as_deref().unwrap_or("done"),
                        writes.as_deref().unwrap_or("done")
                    )));
                }
                let actual = snapshot_of(shifted, self.version).await?;
                let (expected, actual) = match (masked, allowance::mask(self.form)) {
                    (Some(masked), Some(mask)) if raw.data != actual.data => {
                        let actual_masked = masked_snapshot_of(shifted, &actual, mask).await?;
                        if masked.data == actual_masked.data {
                            allowed.push(allowance::VOLATILE_VALUES);
                        }
                        (masked, actual_masked)
                    }
                    _ => (raw, actual),
                };
                let applicable = allowance::applicable(self.shape, self.form, self.version);
                match explain(&expected, &actual, &applicable, &mut allowed) {
                    None => Ok(Verdict::Same { cas, allowed }),
                    Some(difference) => Ok(Verdict::Differs(format!(
                        "native and pgshift ({}) differ\n{difference}",
                        if cas { "copy-and-swap" } else { "native route" }
                    ))),
                }
            }
            (Ok(()), Pgshift::Refused { cause, message }) => {
                let documented = self.form.documented_refusals(self.shape);
                match documented.iter().any(|(c, _)| *c == cause) {
                    true => {
                        self.unchanged(shifted).await?;
                        Ok(Verdict::RefusedAsDocumented(cause))
                    }
                    false => Ok(Verdict::Differs(format!(
                        "PostgreSQL runs the statement; pgshift refused it ({cause}: {message}), which no documented refusal covers"
                    ))),
                }
            }
            (Ok(()), Pgshift::Failed(error)) => Ok(Verdict::Differs(format!(
                "PostgreSQL runs the statement; pgshift failed: {error}"
            ))),
            (Err(rejected), Pgshift::Done { cas })
                if allowance::cluster_before_15(self.shape, self.form, self.version, rejected) =>
            {
                let now = snapshot_of(shifted, self.version).await?;
                // The rebuild's own allowances (a re-pointed key's clones) apply too.
                let mut allowances = allowance::applicable(self.shape, self.form, self.version);
                allowances.push(&allowance::CLUSTER_MARKS);
                match explain(self.before, &now, &allowances, &mut allowed) {
                    None => {
                        if !allowed.contains(&allowance::CLUSTER_BEFORE_15) {
                            allowed.push(allowance::CLUSTER_BEFORE_15);
                        }
                        Ok(Verdict::Same { cas, allowed })
                    }
                    Some(difference) => Ok(Verdict::Differs(format!(
                        "PostgreSQL 14 cannot cluster a partitioned table; pgshift's rebuild changed more than the clustered marks\n{difference}"
                    ))),
                }
            }
            (Err(rejected), Pgshift::Done { cas }) => Ok(Verdict::Differs(format!(
                "PostgreSQL rejects the statement ({rejected}); pgshift ran it ({})",
                if cas { "copy-and-swap" } else { "native route" }
            ))),
            (Err(rejected), Pgshift::Refused { .. } | Pgshift::Failed(_)) => {
                self.unchanged(shifted).await?;
                Ok(Verdict::BothRejected(rejected.clone()))
            }
        }
    }

    /// Writes through the shape's views (as the superuser), after the statement and
    /// before the snapshot, on both sides: what the views' triggers and rules do to
    /// the table and to `item_audit` is then compared with the rows. `Some` with the
    /// server's words when it refused them (one implicit transaction: nothing of them
    /// is then left), which both sides must do alike.
    async fn write_through_views(&self, client: &Client) -> Option<String> {
        let sql = self.shape.view_ties.behaviour_sql(self.shape)?;
        client.batch_execute(&sql).await.err().map(|e| db_error(&e))
    }

    /// Fails unless `db` is as the template was.
    async fn unchanged(&self, db: &str) -> Result<(), String> {
        let now = snapshot_of(db, self.version).await?;
        match explain(self.before, &now, &[], &mut Vec::new()) {
            None => Ok(()),
            Some(difference) => Err(format!(
                "pgshift did not run the statement, but the database changed\n{difference}"
            )),
        }
    }
}

/// The difference between two snapshots that no allowance in `applicable` explains,
/// or `None`; the allowances that explained something are added to `allowed`.
pub fn explain(
    expected: &Snapshot,
    actual: &Snapshot,
    applicable: &[&'static Allowance],
    allowed: &mut Vec<&'static str>,
) -> Option<String> {
    let mut out = String::new();
    for (what, e, a) in [
        ("catalog", &expected.catalog, &actual.catalog),
        ("data", &expected.data, &actual.data),
    ] {
        let (mut missing, mut extra) = snapshot::difference(e, a);
        for allowance in applicable {
            if missing.is_empty() && extra.is_empty() {
                break;
            }
            let blank = |lines: &[String]| -> Vec<String> {
                lines
                    .iter()
                    .map(|l| (allowance.blank)(l).unwrap_or_else(|| l.clone()))
                    .collect()
            };
            let (m, x) = snapshot::difference(&blank(&missing), &blank(&extra));
            if m.len() < missing.len() {
                if !allowed.contains(&allowance.id) {
                    allowed.push(allowance.id);
                }
                // What is left, as the lines were (unblanked).
                let keep = |lines: &[String], left: &[String]| -> Vec<String> {
                    let mut left = left.to_vec();
                    lines
                        .iter()
                        .filter(|l| {
                            let b = (allowance.blank)(l).unwrap_or_else(|| (*l).clone());
                            match left.iter().position(|x| *x == b) {
                                Some(i) => {
                                    left.remove(i);
                                    true
                                }
                                None => false,
                            }
                        })
                        .cloned()
                        .collect()
                };
                missing = keep(&missing, &m);
                extra = keep(&extra, &x);
            }
        }
        for (lines, sign) in [(missing, "native only:"), (extra, "pgshift only:")] {
            for line in lines {
                let shown: String = line.chars().take(400).collect();
                out.push_str(&format!("  {what} {sign} {shown}\n"));
            }
        }
    }
    (!out.is_empty()).then_some(out)
}
