//! Change capture (live mode) and the write fence (quiesced mode), and the proof that
//! they are intact.
//!
//! Live: an `AFTER INSERT OR UPDATE OR DELETE … FOR EACH ROW` trigger on the source
//! writes each changed key into the change log; PostgreSQL clones it to every
//! partition. A `BEFORE TRUNCATE` statement trigger, on the parent and on each
//! partition (statement triggers are not cloned), refuses `TRUNCATE`. Quiesced: one
//! `BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE … FOR EACH STATEMENT` trigger on the
//! parent and on each partition refuses every write with SQLSTATE 55006.
//!
//! All of them are `ENABLE ALWAYS` (INV: CO-4): an ORIGIN trigger does not fire for a
//! session with `session_replication_role = replica`, and that write would be lost at
//! the swap. [`check`] proves them intact by the relations' OIDs and their exact shape.

use tokio_postgres::Client;

use super::error::CasError;
use super::plan::{Mode, RunPlan};
use pgshift_sql::{quote_ident, quote_literal};

/// `tgtype` bits (PostgreSQL's `TRIGGER_TYPE_*`).
const ROW: i16 = 1;
const BEFORE: i16 = 1 << 1;
const INSERT: i16 = 1 << 2;
const DELETE: i16 = 1 << 3;
const UPDATE: i16 = 1 << 4;
const TRUNCATE: i16 = 1 << 5;

/// The capture row trigger's `tgtype`.
pub const CAPTURE_TYPE: i16 = ROW | INSERT | DELETE | UPDATE;
/// The `TRUNCATE` refusal's `tgtype`.
pub const TRUNCATE_TYPE: i16 = BEFORE | TRUNCATE;
/// The fence's `tgtype`.
pub const FENCE_TYPE: i16 = BEFORE | INSERT | DELETE | UPDATE | TRUNCATE;

/// The log table, the functions and (per mode) the triggers, as SQL run in one
/// transaction.
pub fn install_sql(plan: &RunPlan) -> Result<String, CasError> {
    let names = plan.names();
    let log = names.log_table();
    let capture = names.capture_function();
    let refuse = names.refuse_function();
    let tag = format!("$pgshift_{}$", names.run());
    let key_columns: Vec<String> = plan
        .key
        .columns()
        .iter()
        .map(|c| format!("{} {}", quote_ident(&c.name), c.type_sql))
        .collect();
    let key_list = quoted_keys(plan);
    let body = capture_body(plan);
    if body.contains(&tag) {
        return Err(CasError::Record(
            "a key column name collides with the function's quoting".to_owned(),
        ));
    }
    let refuse_body = refuse_body(plan);
    let mut sql = vec![
        format!(
            "CREATE TABLE {log} (log_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, {})",
            key_columns.join(", ")
        ),
        format!("CREATE INDEX ON {log} ({})", key_list.join(", ")),
        // No `SET search_path` on the capture function: a function-level setting is
        // saved and restored on every call, for every row written. The body names
        // nothing through the search path (see `capture_body`), so the writer's own
        // search path cannot change what it does.
        format!(
            "CREATE FUNCTION {capture}() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER \
             AS {tag}{body}{tag}"
        ),
        format!(
            "CREATE FUNCTION {refuse}() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER \
             SET search_path = pg_catalog, pg_temp AS {tag}{refuse_body}{tag}"
        ),
    ];
    let relations = plan.source_relations();
    match plan.options.mode {
        Mode::Live => {
            let source = &plan.source.table.name;
            let trigger = quote_ident(&names.capture_trigger());
            sql.push(format!(
                "CREATE TRIGGER {trigger} AFTER INSERT OR UPDATE OR DELETE ON {source} FOR EACH ROW EXECUTE FUNCTION {capture}()"
            ));
            sql.push(format!(
                "ALTER TABLE {source} ENABLE ALWAYS TRIGGER {trigger}"
            ));
            let truncate = quote_ident(&names.truncate_trigger());
            for relation in &relations {
                sql.push(format!(
                    "CREATE TRIGGER {truncate} BEFORE TRUNCATE ON {relation} FOR EACH STATEMENT EXECUTE FUNCTION {refuse}()"
                ));
                sql.push(format!(
                    "ALTER TABLE ONLY {relation} ENABLE ALWAYS TRIGGER {truncate}"
                ));
            }
        }
        Mode::Quiesced => {
            let fence = quote_ident(&names.fence_trigger());
            for relation in &relations {
                sql.push(format!(
                    "CREATE TRIGGER {fence} BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON {relation} FOR EACH STATEMENT EXECUTE FUNCTION {refuse}()"
                ));
                sql.push(format!(
                    "ALTER TABLE ONLY {relation} ENABLE ALWAYS TRIGGER {fence}"
                ));
            }
        }
    }
    Ok(sql.join(";\n"))
}

fn quoted_keys(plan: &RunPlan) -> Vec<String> {
    plan.key
        .columns()
        .iter()
        .map(|c| quote_ident(&c.name))
        .collect()
}

/// `OLD."a", OLD."b"`: the key columns of a trigger's record.
fn record_keys(keys: &[String], record: &str) -> String {
    keys.iter()
        .map(|k| format!("{record}.{k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The capture function's body: the new key (on an insert or update) and the old key
/// (on a delete, or an update that moved the key) go into the change log.
///
/// The function is `SECURITY DEFINER` (writers need no rights on the log) without a
/// `SET search_path` (a per-call cost), so the body must not resolve any name or
/// operator through the caller's search path: the log table is schema-qualified, the
/// comparisons are `OPERATOR(pg_catalog.=)` one key column at a time (a row
/// comparison, or `IS DISTINCT FROM`, would look up `=` through the search path), and
/// `IS NOT TRUE` logs the old key too when a comparison is not decidedly true. Those
/// operators are the ones the earlier `search_path = pg_catalog, pg_temp` resolved.
fn capture_body(plan: &RunPlan) -> String {
    let keys = quoted_keys(plan);
    let same_key = keys
        .iter()
        .map(|k| format!("OLD.{k} OPERATOR(pg_catalog.=) NEW.{k}"))
        .collect::<Vec<_>>()
        .join(" AND ");
    format!(
        "BEGIN
  IF TG_OP OPERATOR(pg_catalog.=) 'INSERT' THEN
    INSERT INTO {log} ({keys}) VALUES ({new});
  ELSIF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN
    INSERT INTO {log} ({keys}) VALUES ({old});
  ELSE
    IF ({same_key}) IS NOT TRUE THEN
      INSERT INTO {log} ({keys}) VALUES ({old});
    END IF;
    INSERT INTO {log} ({keys}) VALUES ({new});
  END IF;
  RETURN NULL;
END",
        old = record_keys(&keys, "OLD"),
        new = record_keys(&keys, "NEW"),
        keys = keys.join(", "),
        log = plan.names().log_table(),
    )
}

/// The capture function's body as runs installed it before the function lost its
/// `SET search_path = pg_catalog, pg_temp` (which its `IS DISTINCT FROM` needs): a
/// run started by an earlier version and resumed by this one has it, and it is as
/// intact as the current shape when it still has exactly that body and setting.
fn legacy_capture_body(plan: &RunPlan) -> String {
    let keys = quoted_keys(plan);
    format!(
        "BEGIN
  IF TG_OP OPERATOR(pg_catalog.=) 'DELETE' OR (TG_OP OPERATOR(pg_catalog.=) 'UPDATE' AND ({old}) IS DISTINCT FROM ({new})) THEN
    INSERT INTO {log} ({keys}) VALUES ({old});
  END IF;
  IF TG_OP OPERATOR(pg_catalog.<>) 'DELETE' THEN
    INSERT INTO {log} ({keys}) VALUES ({new});
  END IF;
  RETURN NULL;
END",
        old = record_keys(&keys, "OLD"),
        new = record_keys(&keys, "NEW"),
        keys = keys.join(", "),
        log = plan.names().log_table(),
    )
}

/// `proconfig` of the functions that have `SET search_path = pg_catalog, pg_temp`.
const PINNED_SEARCH_PATH: &str = "search_path=pg_catalog, pg_temp";

/// The refusal function's body: every write (or `TRUNCATE`) fails with SQLSTATE 55006.
fn refuse_body(plan: &RunPlan) -> String {
    let message = quote_literal(&format!(
        "pgshift run {}: writes to %s are refused while it rewrites the table",
        plan.names().run()
    ));
    format!(
        "BEGIN RAISE EXCEPTION USING ERRCODE = '55006', MESSAGE = pg_catalog.format({message}, TG_TABLE_NAME); END"
    )
}

/// A trigger function's body and `proconfig` (its `SET` options).
type Shape = (String, Option<Vec<String>>);

/// What is wrong with the capture or fence on one relation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Breach {
    /// The relation's OID.
    pub relation: u32,
    /// What is wrong.
    pub problem: String,
}

/// The catalog read behind [`check`]: every trigger of `$1` (relation OIDs) named in
/// `$2`, with its function. One round trip for every relation and trigger name, since
/// the swap runs it under its lock.
pub const CHECK_SQL: &str = "SELECT t.tgrelid, t.tgname::pg_catalog.text, \
        t.tgenabled::pg_catalog.text, t.tgtype, t.tgqual IS NULL, \
        pg_catalog.cardinality(t.tgattr::pg_catalog.int2[]) OPERATOR(pg_catalog.=) 0, t.tgnargs, \
        t.tgdeferrable, t.tginitdeferred, fn.nspname::pg_catalog.text, f.proname::pg_catalog.text, \
        f.prosrc, f.prosecdef, f.proconfig \
   FROM pg_catalog.pg_trigger t \
   JOIN pg_catalog.pg_proc f ON f.oid OPERATOR(pg_catalog.=) t.tgfoid \
   JOIN pg_catalog.pg_namespace fn ON fn.oid OPERATOR(pg_catalog.=) f.pronamespace \
  WHERE t.tgrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[]) \
    AND t.tgname OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.text[])";

/// One trigger the run installed on every relation: its name, the function it calls,
/// the shapes that function may have, and its `tgtype`.
struct Expected {
    trigger: String,
    function: pgshift_sql::QualifiedName,
    shapes: Vec<Shape>,
    tgtype: i16,
}

/// The triggers the run's mode installs on every relation.
fn expected(plan: &RunPlan) -> Vec<Expected> {
    let names = plan.names();
    let pinned = Some(vec![PINNED_SEARCH_PATH.to_owned()]);
    let refuse = vec![(refuse_body(plan), pinned.clone())];
    match plan.options.mode {
        Mode::Live => vec![
            Expected {
                trigger: names.capture_trigger(),
                function: names.capture_function(),
                shapes: vec![
                    (capture_body(plan), None),
                    (legacy_capture_body(plan), pinned),
                ],
                tgtype: CAPTURE_TYPE,
            },
            Expected {
                trigger: names.truncate_trigger(),
                function: names.refuse_function(),
                shapes: refuse,
                tgtype: TRUNCATE_TYPE,
            },
        ],
        Mode::Quiesced => vec![Expected {
            trigger: names.fence_trigger(),
            function: names.refuse_function(),
            shapes: refuse,
            tgtype: FENCE_TYPE,
        }],
    }
}

/// [`CHECK_SQL`]'s parameters for `plan`: the relations' OIDs and the trigger names.
pub fn check_params(plan: &RunPlan) -> (Vec<u32>, Vec<String>) {
    let names = expected(plan).into_iter().map(|e| e.trigger).collect();
    (plan.source_oids(), names)
}

/// Proves the capture (live) or fence (quiesced) intact on the source and on every
/// partition, by OID: each relation has exactly the expected trigger — named as
/// planned, calling the run's function, with the planned events and timing,
/// `tgenabled = 'A'`, no `WHEN`, no column list, no arguments, not deferrable, and the
/// function still has the body and the settings (`SET` options) the run gave it, and
/// is still `SECURITY DEFINER`.
/// Returns every breach found (none: intact).
pub async fn check(client: &Client, plan: &RunPlan) -> Result<Vec<Breach>, CasError> {
    let (oids, trigger_names) = check_params(plan);
    let rows = client
        .query(CHECK_SQL, &[&oids, &trigger_names])
        .await
        .map_err(|e| CasError::db("checking the capture triggers", e))?;
    Ok(breaches(plan, &rows))
}

/// The breaches [`CHECK_SQL`]'s rows show (see [`check`]).
pub fn breaches(plan: &RunPlan, rows: &[tokio_postgres::Row]) -> Vec<Breach> {
    // INV: CO-4 — intact means: on every relation, by OID, the exact trigger the run
    // installed, ALWAYS-enabled, with nothing that could make it skip a row.
    // A function is intact when its body and settings are one of the shapes a run
    // installs, both together (and it is still SECURITY DEFINER).
    let expected = expected(plan);
    // A trigger's name is unique on its relation: at most one row per pair.
    let found: std::collections::HashMap<(u32, String), &tokio_postgres::Row> = rows
        .iter()
        .map(|r| ((r.get::<_, u32>(0), r.get::<_, String>(1)), r))
        .collect();
    let mut breaches = Vec::new();
    for oid in &plan.source_oids() {
        for Expected {
            trigger,
            function,
            shapes,
            tgtype,
        } in &expected
        {
            let Some(row) = found.get(&(*oid, trigger.clone())) else {
                breaches.push(Breach {
                    relation: *oid,
                    problem: format!("trigger {trigger} is missing"),
                });
                continue;
            };
            let mut problems = Vec::new();
            let enabled: String = row.get(2);
            if enabled != "A" {
                problems.push(format!("enabled state is {enabled:?}, not ALWAYS"));
            }
            if row.get::<_, i16>(3) != *tgtype {
                problems.push(format!(
                    "events or timing changed (tgtype {})",
                    row.get::<_, i16>(3)
                ));
            }
            if !row.get::<_, bool>(4) {
                problems.push("it has a WHEN condition".to_owned());
            }
            if !row.get::<_, bool>(5) {
                problems.push("it has a column list".to_owned());
            }
            if row.get::<_, i16>(6) != 0 {
                problems.push("it has arguments".to_owned());
            }
            if row.get::<_, bool>(7) || row.get::<_, bool>(8) {
                problems.push("it is deferrable".to_owned());
            }
            let (schema, name): (String, String) = (row.get(9), row.get(10));
            if Some(&schema) != function.schema.as_ref() || name != function.name {
                problems.push(format!("it calls {schema}.{name}, not {function}"));
            } else if !row.get::<_, bool>(12)
                || !shapes.contains(&(row.get::<_, String>(11), row.get(13)))
            {
                problems.push(format!("function {function} was replaced"));
            }
            if !problems.is_empty() {
                breaches.push(Breach {
                    relation: *oid,
                    problem: format!("trigger {trigger}: {}", problems.join("; ")),
                });
            }
        }
    }
    breaches
}
