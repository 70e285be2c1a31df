//! The user's PL/pgSQL functions and procedures on the clone, instrumented like a
//! `DO` block so that what they execute is logged in the same ordered log, and the
//! functions a statement called, read back before its `COMMIT`.
//!
//! Before each traced statement, every PL/pgSQL function or procedure outside the
//! system schemas, the tracer's own and extensions (not trigger or event-trigger
//! functions: what a trigger runs is not its caller's own) whose body is not the one
//! pgshift last put there is read from `pg_get_functiondef` and replaced by the same
//! definition with only its body instrumented (`pgshift_sql::DoBlock`); one whose
//! statements cannot be logged is left as it is, with the reason. The clone is
//! throwaway, so replacing its functions changes nothing of the target. The
//! replacements' own DDL is drained from the recorders before the statement runs.
//!
//! Which functions a statement called comes from `pg_stat_xact_user_functions`
//! (`track_functions = 'all'` on the clone's sessions), nested calls included; each
//! says why its statements were not logged when they were not.

use std::collections::HashMap;

use pgshift_sql::{DoBlock, QualifiedName};
use tokio_postgres::Client;

use super::error::{probe, server_words, TraceError};
use super::probes::{self, LOG_FUNCTION};
use super::types::CalledFunction;

/// What pgshift did with one function of the clone, by OID.
#[derive(Clone, Debug)]
enum Entry {
    /// Instrumented: the body now in the clone, and its queries.
    Logged {
        prosrc: String,
        queries: Vec<String>,
    },
    /// Left as it was: its body, and why it is not logged.
    Unlogged { prosrc: String, why: String },
}

/// The clone's PL/pgSQL functions as pgshift left them.
#[derive(Debug, Default)]
pub(crate) struct Instrumented {
    by_oid: HashMap<u32, Entry>,
}

/// The PL/pgSQL functions and procedures pgshift instruments.
const CANDIDATES: &str = "SELECT p.oid, p.prosrc FROM pg_catalog.pg_proc p \
     JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace \
     JOIN pg_catalog.pg_language l ON l.oid = p.prolang \
     WHERE l.lanname = 'plpgsql' AND p.oid >= 16384 AND p.prokind IN ('f', 'p') \
       AND n.nspname NOT IN ('pgshift_trace', 'pg_catalog', 'information_schema') \
       AND p.prorettype NOT IN ('pg_catalog.trigger'::pg_catalog.regtype, \
                                'pg_catalog.event_trigger'::pg_catalog.regtype) \
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d \
                       WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass \
                         AND d.objid = p.oid AND d.deptype = 'e') \
     ORDER BY p.oid";

/// The user functions this transaction called so far.
const CALLED: &str = "SELECT f.funcid, n.nspname, p.proname, \
            pg_catalog.pg_get_function_identity_arguments(p.oid), l.lanname, \
            p.prokind::text, p.prorettype::pg_catalog.regtype::text, p.prosecdef, \
            COALESCE(pg_catalog.array_to_string(p.proconfig, ', '), ''), p.prosrc \
     FROM pg_catalog.pg_stat_xact_user_functions f \
     JOIN pg_catalog.pg_proc p ON p.oid = f.funcid \
     JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace \
     JOIN pg_catalog.pg_language l ON l.oid = p.prolang \
     WHERE n.nspname <> 'pgshift_trace' \
     ORDER BY n.nspname, p.proname, f.funcid";

impl Instrumented {
    /// Instruments every candidate function whose body is not the one pgshift last
    /// saw, outside any transaction of a traced statement.
    pub(crate) async fn refresh(&mut self, client: &Client) -> Result<(), TraceError> {
        let rows = client.query(CANDIDATES, &[]).await.map_err(probe)?;
        let mut replaced = false;
        for row in &rows {
            let oid: u32 = row.get(0);
            let prosrc: String = row.get(1);
            let current = match self.by_oid.get(&oid) {
                Some(Entry::Logged { prosrc: p, .. } | Entry::Unlogged { prosrc: p, .. }) => {
                    p == &prosrc
                }
                None => false,
            };
            if current {
                continue;
            }
            replaced = true;
            let entry = self.instrument(client, oid, prosrc).await?;
            self.by_oid.insert(oid, entry);
        }
        if replaced {
            // The replacements' own DDL is not the next statement's.
            probes::drain(client).await?;
        }
        Ok(())
    }

    async fn instrument(
        &self,
        client: &Client,
        oid: u32,
        prosrc: String,
    ) -> Result<Entry, TraceError> {
        let definition: String = client
            .query_one(
                "SELECT pg_catalog.pg_get_functiondef($1::pg_catalog.oid)",
                &[&oid],
            )
            .await
            .map_err(probe)?
            .get(0);
        let unlogged = |why: String| Entry::Unlogged {
            prosrc: prosrc.clone(),
            why,
        };
        let block = match DoBlock::of_function(&definition) {
            Ok(block) => block,
            Err(err) => return Ok(unlogged(format!("its body was not read: {err}"))),
        };
        if let Some(construct) = block.opaque.first() {
            return Ok(unlogged(format!(
                "its {construct} runs statements that cannot be logged"
            )));
        }
        let text = match block.instrument_function(&definition, LOG_FUNCTION) {
            Ok(text) => text,
            Err(err) => return Ok(unlogged(format!("it could not be instrumented: {err}"))),
        };
        if let Err(err) = client.batch_execute(&text).await {
            let (message, _) = server_words(&err);
            return Ok(unlogged(format!(
                "its instrumented copy was rejected: {message}"
            )));
        }
        let prosrc: String = client
            .query_one(
                "SELECT prosrc FROM pg_catalog.pg_proc WHERE oid = $1::pg_catalog.oid",
                &[&oid],
            )
            .await
            .map_err(probe)?
            .get(0);
        Ok(Entry::Logged {
            prosrc,
            queries: block.queries,
        })
    }

    /// The user functions the session's open transaction called.
    pub(crate) async fn called(&self, client: &Client) -> Result<Vec<CalledFunction>, TraceError> {
        let rows = client.query(CALLED, &[]).await.map_err(probe)?;
        Ok(rows
            .iter()
            .map(|row| {
                let oid: u32 = row.get(0);
                let prokind: String = row.get(5);
                let returns: String = row.get(6);
                let kind = match (prokind.as_str(), returns.as_str()) {
                    (_, "trigger") => "trigger",
                    (_, "event_trigger") => "event-trigger",
                    ("p", _) => "procedure",
                    _ => "function",
                };
                let language: String = row.get(4);
                let config: String = row.get(8);
                let prosrc: String = row.get(9);
                let (not_logged, queries) =
                    self.judge(oid, kind, &language, row.get(7), &config, &prosrc);
                CalledFunction {
                    name: QualifiedName::qualified(
                        row.get::<_, String>(1),
                        row.get::<_, String>(2),
                    ),
                    arguments: row.get(3),
                    kind,
                    language,
                    not_logged,
                    queries,
                }
            })
            .collect())
    }

    /// Why a called function's statements were not logged (or would not run the same
    /// at the top level), and its body's queries when it was instrumented.
    fn judge(
        &self,
        oid: u32,
        kind: &str,
        language: &str,
        security_definer: bool,
        config: &str,
        prosrc: &str,
    ) -> (Option<String>, Vec<String>) {
        let why = match kind {
            "trigger" => Some("it is a trigger function: what a trigger runs is not logged as the statement's own".to_owned()),
            "event-trigger" => Some("it is an event-trigger function: what it runs is not logged".to_owned()),
            _ if language != "plpgsql" => Some(format!(
                "it is in LANGUAGE {language}: only PL/pgSQL bodies are logged"
            )),
            _ if security_definer => Some(
                "it is SECURITY DEFINER: its statements run as its owner, not as the migration's role".to_owned(),
            ),
            _ if !config.is_empty() => Some(format!(
                "it sets {config} for its body: its statements would not run under the same settings at the top level"
            )),
            _ => None,
        };
        if why.is_some() {
            return (why, Vec::new());
        }
        match self.by_oid.get(&oid) {
            Some(Entry::Logged { prosrc: p, queries }) if p == prosrc => (None, queries.clone()),
            Some(Entry::Unlogged { prosrc: p, why }) if p == prosrc => (Some(why.clone()), Vec::new()),
            _ => (
                Some("it was defined or replaced by this statement, after pgshift instrumented the clone's functions".to_owned()),
                Vec::new(),
            ),
        }
    }
}
