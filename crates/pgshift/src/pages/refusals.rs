//! The page of every refusal cause. `do_this` is the line printed after every refusal
//! of that cause.

use super::{Page, PageKind};
use crate::refusal::RefusalCause;

/// The page of `cause`.
pub fn refusal_page(cause: RefusalCause) -> Page {
    let page = Page::builder(
        cause.name(),
        PageKind::Refusal {
            class: cause.class(),
        },
    );
    match cause {
        RefusalCause::OpaqueProceduralCode => page(
            "A `DO` block or `CALL`: its locks and effects cannot be known before it runs.",
            "The statements a `DO` block or a procedure runs are only known when it runs, so pgshift cannot bound their locks or their work.",
            "Running it could take any lock for any time, which is the one thing pgshift promises not to do.",
            "Plan, apply or migrate it with `--url` (pgshift then traces it on a throwaway clone and decides from what it did), or write the statements the block runs as plain SQL in the migration.",
            "",
            "Without a trace (offline `lint`), pgshift cannot bound procedural code and reports it as `opaque-code`; `plan`, `apply` and `migrate` trace it on a clone of the target and run it by the trace (docs/EXECUTION.md, Procedural code).",
        ),
        RefusalCause::ProceduralFailedOnClone => page(
            "Procedural code failed when it was traced on a throwaway clone of the target's schema.",
            "pgshift runs procedural code (a `DO` block, a `CALL`, a `SELECT` of a function) first on a throwaway cluster holding the target's schema, to see what it does; there, the server raised an error (the message gives its words), or an earlier statement of the input did.",
            "Code that fails on the target's schema would fail on the target too, or take a path nobody tested.",
            "Fix the statement so that it runs on the current schema (`pgshift lint --trace --url …` shows the server's error), then plan it again.",
            "",
            "pgshift traces procedural code on a clone before it runs anything, and refuses the whole file when the trace fails.",
        ),
        RefusalCause::ProceduralBlocking => page(
            "Procedural code whose traced DDL takes a lock that blocks writes (or rewrites) on a table with rows, and that pgshift cannot expand into statements it routes.",
            "Traced on a clone, the code took a lock that blocks writes (or rewrote a table) on tables that hold rows in the target; and either its control flow depends on table data (the clone has none, so the target may take another path), or its statements could not all be logged (a function it calls runs DDL, `EXECUTE … USING`), or its statements on one table cannot be combined. pgshift cannot route what it does, and running it as written could hold that lock for the whole rewrite or build. A logged `DO` block is first run read-only on the target (guarded, PC-5): this refusal then comes at run time, when that run would have executed a statement (listed in the message) or one of its handlers caught the read-only error, and nothing of it was done.",
            "A rewrite or build under ACCESS EXCLUSIVE or SHARE on a table with rows blocks every writer for as long as it takes.",
            "Write the statements it ran on the clone (listed in the message) as plain SQL in the migration, so each runs by its online route; or, to run it as written anyway (reported as accepted, exit 3), pass --allow-procedural FILE:LINE.",
            "",
            "pgshift runs procedural code natively only where its trace and the target bound it (weak or brief locks, or the tables it locks strongly are empty), and expands code whose control flow reads only the catalog; a guarded block is done only when its read-only run on the target executed nothing.",
        ),
        RefusalCause::ProceduralSchemaChanged => page(
            "The target's schema changed while procedural code was traced on a clone of it.",
            "The expansion of a `DO` block is what it executed on a clone of the schema as it was when the clone was dumped; a fingerprint of the target's schema read before the dump differs from one read after the trace, so the expansion may not be what the block would execute now.",
            "Running statements derived from an outdated schema could alter the wrong columns or miss new ones.",
            "Run the command again once the other schema change has finished.",
            "",
            "pgshift reads the schema's fingerprint before the dump and after the trace, and uses an expansion only when the two agree.",
        ),
        RefusalCause::UnclassifiedStatement => page(
            "A statement form pgshift does not classify, so it cannot bound its locks.",
            "pgshift does not know this statement form (or this use of it), so it cannot say which locks it takes, how heavy its work is, or how to run it safely.",
            "Unknown locks can block the table for an unknown time.",
            "Run this statement yourself, under a short `lock_timeout`, after checking in PostgreSQL's documentation which lock it takes; run the rest of the migration with pgshift.",
            "SET lock_timeout = '2s';",
            "pgshift runs only statements it has classified.",
        ),
        RefusalCause::TwoPhaseCommit => page(
            "Transaction control pgshift does not run on behalf of a migration (`PREPARE TRANSACTION`, `COMMIT PREPARED`).",
            "A prepared transaction outlives its session and keeps its locks until someone ends it.",
            "A forgotten one blocks the table and holds back vacuum indefinitely.",
            "Remove `PREPARE TRANSACTION` / `COMMIT PREPARED` from the migration and let it commit normally.",
            "SELECT gid, prepared, owner, database FROM pg_prepared_xacts;",
            "pgshift commits each unit itself and runs no two-phase commit.",
        ),
        RefusalCause::RewriteUnsupported => page(
            "A rewrite that copy-and-swap does not carry through yet.",
            "The statement rewrites the table, and this form of it (or something about the table) is not one copy-and-swap can carry over to a shadow table and verify.",
            "The only other way to run it is the blocking form, which holds ACCESS EXCLUSIVE for the whole rewrite.",
            "Rewrite by hand with the expand-and-contract recipe of `pgshift explain table-rewrite`, or run the statement yourself in a maintenance window.",
            "",
            "pgshift runs rewrites only through copy-and-swap, or as written when `--allow-blocking TABLE` accepts the blocking form of a rewrite it routes there.",
        ),
        RefusalCause::ServerTooOld => page(
            "The statement needs a server version newer than the target's.",
            "The statement uses a feature the connected PostgreSQL version does not have (the message names the version it needs).",
            "PostgreSQL would reject it with a syntax or feature error.",
            "Use the older form the message names, or upgrade the server first.",
            "SELECT current_setting('server_version');",
            "pgshift judges every statement against the connected server's version.",
        ),
        RefusalCause::TableMissing => page(
            "The statement names a table that does not exist.",
            "No table of that name is visible with the connection's `search_path` (or in the schema the statement names), and no earlier statement of the run creates it.",
            "PostgreSQL would reject it with `relation … does not exist` (SQLSTATE 42P01).",
            "Check the name, the schema and the database you connected to; create the table in an earlier migration first.",
            "SELECT current_database(), current_setting('search_path');",
            "pgshift reads the catalog before it runs anything, and refuses the whole file.",
        ),
        RefusalCause::WrongRelationKind => page(
            "The statement names a relation of the wrong kind (for example an index where a table is expected).",
            "The name denotes a relation, but not of the kind the statement acts on: an index, a view, a sequence or a foreign table where a table is expected.",
            "PostgreSQL would reject it, or do something other than intended.",
            "Name the table, or use the statement for that kind of relation (`ALTER INDEX`, `ALTER VIEW`, `ALTER SEQUENCE`).",
            "SELECT relname, relkind FROM pg_class WHERE relname = 't';",
            "pgshift reads each relation's kind before it runs anything.",
        ),
        RefusalCause::ColumnMissing => page(
            "The statement names a column that does not exist.",
            "The table has no column of that name (dropped columns do not count).",
            "PostgreSQL would reject it with `column … does not exist` (SQLSTATE 42703).",
            "Check the column name (quoted identifiers are case-sensitive), or add the column in an earlier migration first.",
            "SELECT attname FROM pg_attribute WHERE attrelid = 't'::regclass AND attnum > 0 AND NOT attisdropped;",
            "pgshift reads the table's columns before it runs anything.",
        ),
        RefusalCause::DetachConcurrentlyWithDefault => page(
            "`DETACH PARTITION CONCURRENTLY` while the table has a default partition, which PostgreSQL does not allow.",
            "PostgreSQL refuses `DETACH PARTITION … CONCURRENTLY` when the partitioned table has a default partition.",
            "The statement would fail.",
            "Detach without `CONCURRENTLY` under a short `lock_timeout` (it takes ACCESS EXCLUSIVE on the parent briefly), or detach the default partition first.",
            "SET lock_timeout = '2s';\n\
ALTER TABLE t DETACH PARTITION t_2024;",
            "pgshift reads the partitions before it runs anything.",
        ),
        RefusalCause::NotAllowedInTransaction => page(
            "A statement that must run outside a transaction block, placed inside one.",
            "`CREATE INDEX CONCURRENTLY`, `REINDEX … CONCURRENTLY`, `DETACH PARTITION … CONCURRENTLY`, `VACUUM` and a few others cannot run inside a transaction block, and this one is inside an explicit `BEGIN … COMMIT` (or a file the runner wraps in one).",
            "PostgreSQL would reject it with `… cannot run inside a transaction block` (SQLSTATE 25001).",
            "Take the statement out of the `BEGIN … COMMIT` block, or make `-- no-transaction` the file's first line.",
            "-- no-transaction\n\
CREATE INDEX CONCURRENTLY t_c_idx ON t (c);",
            "`pgshift apply` runs such a statement on its own, outside any transaction, when nothing around it needs one.",
        ),
        RefusalCause::NonPermanentTable => page(
            "An unlogged or temporary table, which copy-and-swap cannot carry through (changes to it are not WAL-logged, or it is private to one session).",
            "Copy-and-swap relies on a permanent table: its capture and copy sessions must see the same rows, and an unlogged table's changes are not WAL-logged while a temporary one is private to one session.",
            "The rewrite could only run in its blocking form.",
            "Run the statement yourself in a maintenance window (it holds ACCESS EXCLUSIVE for the whole rewrite), or make the table permanent first (`SET LOGGED` is itself a rewrite).",
            "",
            "pgshift rewrites only permanent tables online.",
        ),
        RefusalCause::NestedPartitioning => page(
            "A partition that is itself partitioned, where a flow handles one level.",
            "The per-partition flows (concurrent index builds per partition, copy-and-swap of a partitioned table) handle one level of partitioning; this table has a partition that is partitioned again.",
            "pgshift cannot run the safer sequence for every leaf.",
            "Run the steps per leaf partition yourself (see `pgshift explain index-on-partitioned-parent`), or apply the change to each sub-partitioned table separately.",
            "",
            "pgshift handles one level of partitioning.",
        ),
        RefusalCause::CopyAndSwapUnavailable => page(
            "A rewrite that only copy-and-swap runs online, while copy-and-swap is not available; `--allow-blocking TABLE` runs the blocking form instead.",
            "The statement rewrites the table, and the caller gave no connection settings for copy-and-swap (a library caller), so it cannot run online.",
            "The only other way is the blocking form, which holds ACCESS EXCLUSIVE for the whole rewrite.",
            "Run it with `pgshift apply` (which has copy-and-swap), or pass `--allow-blocking TABLE` to accept the blocking form.",
            "",
            "`pgshift apply` and `pgshift migrate` always have copy-and-swap.",
        ),
        RefusalCause::NotSplittable => page(
            "A transaction block whose meaning depends on running as one transaction (`LOCK TABLE`, or data changes with schema changes) but whose statements need steps that cannot share one bounded transaction.",
            "An explicit `BEGIN … COMMIT` holds a statement that must run as a sequence of separately committed steps (or through copy-and-swap), next to a `LOCK TABLE` or a data change that relies on everything committing together. Also: a `LOCK TABLE` in a file its migration runner wraps in one transaction, with statements after it, when pgshift runs that file as several units (the lock would end with its own unit).",
            "Splitting the block would change what it means; running it whole would hold strong locks for the entire sequence.",
            "Move the data change (or the `LOCK TABLE` and what it protects) to a migration file of its own, and the schema changes to another.",
            "",
            "pgshift splits a block into bounded steps only when nothing in it depends on one transaction.",
        ),
        RefusalCause::LockBudgetExhausted => page(
            "The lock a step needs could not be taken within the lock budget, on every attempt.",
            "Each attempt waited `lock_timeout` for the lock and gave up, because another session held a conflicting lock (often a long transaction, or one left idle in a transaction); every attempt failed.",
            "Nothing was changed by that step; waiting longer would have stalled every query queued behind the request.",
            "Find and end the session that holds the table (the query below), or run again when it is quieter; `--lock-timeout-ms` and `--max-attempts` widen the budget.",
            "SELECT pid, state, xact_start, left(query, 60) FROM pg_stat_activity WHERE xact_start < now() - interval '1 minute' ORDER BY xact_start;",
            "pgshift takes every strong lock under a short lock_timeout and retries with jittered backoff; copy-and-swap's swap does the same and leaves the source untouched.",
        ),
        RefusalCause::InvalidIndexExists => page(
            "An invalid index (a failed or interrupted concurrent build) already has the name a build would use; pgshift reports it and never drops it by name.",
            "An index of that name exists but is INVALID: the leftover of a failed or interrupted `CREATE INDEX CONCURRENTLY`, by someone else or by an earlier run.",
            "It slows every write (it is maintained) and answers no query; dropping it by name could drop someone else's build in progress.",
            "Check that no build of it is running, then drop it concurrently and run again.",
            "SELECT indexrelid::regclass FROM pg_index WHERE NOT indisvalid;\n\
DROP INDEX CONCURRENTLY t_c_idx;",
            "pgshift drops only the invalid index its own failed attempt left, after checking the name still denotes that index's OID.",
        ),
        RefusalCause::CutoverUnfenced => page(
            "The capture trigger (or the fence) is missing, disabled, not `ALWAYS`, or changed (a `WHEN`, a column list, arguments, deferral) at the swap: a write could have bypassed the run, so the source stays in place.",
            "At the swap, pgshift found that its capture trigger (or write fence) on the source was not intact, so a write may have reached the source without reaching the shadow table.",
            "Swapping could lose that write.",
            "Find out who changed the trigger, then abort the run (`pgshift abort TABLE`) and start it again.",
            "",
            "pgshift checks the capture trigger under the swap's lock and swaps only when it is intact.",
        ),
        RefusalCause::StandbyLagging => page(
            "A standby did not replay the WAL written before the cutover within `--max-replica-lag`, or its replay position cannot be read: the swap's lock would reach it late, so the swap is not made.",
            "Before taking the swap's lock, pgshift noted the primary's WAL position and waited for every standby in `pg_stat_replication` to replay past it; one did not within the bound, or the connecting role cannot see its position (that needs `pg_read_all_stats`).",
            "The swap's ACCESS EXCLUSIVE lock is replayed on every standby: on one far behind, readers see the old table long after the swap, and replaying the lock behind a long standby query stalls or cancels it.",
            "Find out why the standby is behind (replay paused, a long query holding up replay, a slow disk), let it catch up, then `pgshift resume TABLE`: the run verifies again and swaps. A larger `--max-replica-lag` accepts more lag; grant `pg_read_all_stats` to the role if the position was unreadable.",
            "SELECT application_name, state, replay_lag, pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn) AS bytes_behind FROM pg_stat_replication;",
            "pgshift checks the standbys before the swap takes its lock, leaves the source untouched when one lags, and reports each standby's replay lag at the swap.",
        ),
        RefusalCause::NotAStandby => page(
            "A `--standby-url` does not reach a standby of this primary: the server is not in recovery, its system identifier is another's, or it cannot be read to tell.",
            "Before any work, pgshift connected to each `--standby-url` and asked `pg_is_in_recovery()` and `pg_control_system().system_identifier`: a standby streams from its primary, so it is in recovery and shares the primary's identifier. This one did not, or the role could not call the functions.",
            "Checking the queries of another server proves nothing about the standbys the swap's lock is replayed on: the cutover would cancel their readers unseen.",
            "Give `--standby-url` the connection of a standby of this primary (its host, port and a database there); the run starts nothing until each one is.",
            "SELECT pg_is_in_recovery(), (SELECT system_identifier FROM pg_control_system());  -- on both servers",
            "pgshift proves every `--standby-url` before it records a run or resumes one, and again at the cutover.",
        ),
        RefusalCause::StandbyUrlMissing => page(
            "The run was started with `--standby-url` and is continued without naming one of those standbys again: its queries could not be checked before the swap.",
            "The run record keeps each standby it was started with (host, port and database, never a password); a resume must pass `--standby-url` for every one of them, so that the cutover reads their queries.",
            "Swapping without looking would cancel the standby's readers without warning, which is what the run was asked to avoid.",
            "Resume with the same `--standby-url` values (each standby's connection, with its credentials); `pgshift status` shows the run, and `pgshift abort TABLE` removes it if a standby is gone for good.",
            "",
            "pgshift refuses the resume before any work; nothing is copied, verified or swapped. A run whose swap has already committed is finished without them.",
        ),
        RefusalCause::StandbyQueries => page(
            "At the cutover, a query on a standby named with `--standby-url` held or waited for a lock on the table past the cutover's budget (the swap's replayed lock would hold up replay behind it, then cancel it), or the standby could not be read.",
            "Before taking the swap's lock, pgshift read `pg_locks` and `pg_stat_activity` on each standby for backends holding or waiting for a lock on the table or its partitions, and waited for them to end for as long as the swap's lock attempts may take; some were still there (the message names the standby, their pids and its `max_standby_streaming_delay`), or the standby could not be read.",
            "The swap's ACCESS EXCLUSIVE lock is replayed on every standby: a standby query reading the table holds up replay for up to `max_standby_streaming_delay` and is then cancelled; `hot_standby_feedback` does not prevent lock conflicts.",
            "Let the standby's readers of the table finish (or end them), then `pgshift resume TABLE` with the same `--standby-url` values: the run verifies again and swaps. A larger `--cutover-attempts` or `--cutover-lock-timeout-ms` waits longer for them.",
            "SELECT l.pid, l.mode, l.granted, a.state, a.xact_start, left(a.query, 200) FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.relation = 'TABLE'::regclass;  -- on the standby",
            "pgshift reads each standby's queries before the swap, leaves the source untouched while one would be cancelled, and reports how many queries the swap's replay cancelled there (`pg_stat_database_conflicts.confl_lock`).",
        ),
        RefusalCause::SchemaChanged => page(
            "The source's shape (columns, indexes, constraints, triggers, partitions) changed while the run was copying.",
            "Someone changed the table while copy-and-swap was copying it, so the shadow table no longer matches what the swap would replace.",
            "Swapping would silently undo that change.",
            "Abort the run (`pgshift abort TABLE`) and start it again; avoid other schema changes to the table while it runs.",
            "",
            "pgshift fingerprints the source's shape when the run starts and compares it under the swap's lock.",
        ),
        RefusalCause::DependentMaterializedView => page(
            "A materialized view depends on the table; copy-and-swap does not carry it yet.",
            "A materialized view reads the table; after a swap it would still depend on the old table, and copy-and-swap does not recreate it yet.",
            "The view would go on reading the old table, or block the swap.",
            "Drop the materialized view, run the change, and create the view again (its rows need a `REFRESH`).",
            "",
            "pgshift refuses before the copy starts.",
        ),
        RefusalCause::NestedDependentViews => page(
            "A view depends on a view that depends on the table; copy-and-swap recreates only views that depend on the table directly.",
            "Views that read the table are recreated on the new table at the swap; a view on such a view is not.",
            "It would go on reading the old table's definition, or break.",
            "Drop the outer views, run the change, and create them again.",
            "",
            "pgshift refuses before the copy starts.",
        ),
        RefusalCause::RunInProgress => page(
            "The table is already being rewritten by another run.",
            "A copy-and-swap run of this table is recorded in `pgshift.runs` and has not finished.",
            "Two runs of one table would fight over its shadow and its swap.",
            "Resume that run (`pgshift resume TABLE`) or abort it (`pgshift abort TABLE`); `pgshift status` lists runs.",
            "",
            "pgshift records each run before its work starts, so another process can resume or abort it.",
        ),
        RefusalCause::NoUsableKey => page(
            "Copy-and-swap needs a primary key (or a unique, non-null key) to copy and verify in chunks; the table has none.",
            "Copy-and-swap copies the table in key ranges and verifies each range, so it needs a key that identifies every row.",
            "Without one, the rewrite could only run in its blocking form.",
            "Add a primary key first (built concurrently), then run the change again.",
            "ALTER TABLE t ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY;  -- itself a rewrite: on a large table, add and backfill a column instead\n\
CREATE UNIQUE INDEX CONCURRENTLY t_pkey ON t (id);\n\
ALTER TABLE t ADD CONSTRAINT t_pkey PRIMARY KEY USING INDEX t_pkey;",
            "pgshift refuses before the copy starts.",
        ),
        RefusalCause::MissingPrivilege => page(
            "The connecting role lacks a privilege copy-and-swap needs (ownership of the table, `CREATE` on the database or a schema, the engine's own schema and run table); the message names the `GRANT` that gives it.",
            "Copy-and-swap creates a shadow table, triggers and functions, and swaps tables, which needs the table's ownership and `CREATE` where it works.",
            "Without it, the run would fail partway.",
            "Run the `GRANT` the message names (as the owner or a superuser), or connect as the table's owner, then run again.",
            "",
            "pgshift checks the privileges before a run is recorded.",
        ),
        RefusalCause::NullInExistingRows => page(
            "`ADD COLUMN … NOT NULL` with no default on a table that has rows: every existing row would hold NULL, so PostgreSQL rejects it.",
            "The new column has no default, so every existing row would hold NULL in it, which its NOT NULL forbids; the live table has rows.",
            "PostgreSQL would fail the statement with `column … contains null values` (SQLSTATE 23502) after scanning the table under ACCESS EXCLUSIVE.",
            "Add the column nullable, backfill it in batches, then add `CHECK (c IS NOT NULL) NOT VALID`, `VALIDATE` it and `SET NOT NULL` (`pgshift explain not-null-without-default`); or give it a constant default.",
            "ALTER TABLE t ADD COLUMN c int;\n\
UPDATE t SET c = 0 WHERE id >= 1 AND id < 10001 AND c IS NULL;  -- in batches\n\
ALTER TABLE t ADD CONSTRAINT t_c_not_null CHECK (c IS NOT NULL) NOT VALID;\n\
ALTER TABLE t VALIDATE CONSTRAINT t_c_not_null;\n\
ALTER TABLE t ALTER COLUMN c SET NOT NULL;\n\
ALTER TABLE t DROP CONSTRAINT t_c_not_null;",
            "pgshift reads the table's size and row estimate before it runs anything, and refuses the file.",
        ),
        RefusalCause::BlockingWork => page(
            "A step would scan, build or rewrite an existing table under a lock that blocks writes, and pgshift has no online way to run it.",
            "The statement's work (a validating scan, an index build or a rewrite) runs under a lock that blocks writes for as long as the work takes, and neither a safer native sequence nor copy-and-swap exists for this form.",
            "Writers queue behind the lock for the whole scan or build: on a big table, minutes of downtime.",
            "Rewrite the change in a form pgshift runs online (the message says what it would scan or build), or accept the blocking form for that table with `--allow-blocking TABLE` in a quiet window (exit code 3 says it ran blocking).",
            "SET lock_timeout = '2s';\nSELECT pg_size_pretty(pg_total_relation_size('t'));  -- how long the blocking form would hold its lock grows with this",
            "pgshift never runs such a step and calls it online (LK-6): it runs only when `--allow-blocking` names its table, and then reports it as blocking.",
        ),
        RefusalCause::ColumnUsedByGenerated => page(
            "`ALTER COLUMN … TYPE` of a column a generated column's expression uses, which PostgreSQL refuses.",
            "The column is used by the expression of a generated column of the same table (the message names it). PostgreSQL refuses to change its type, even to a binary-coercible one (`cannot alter type of a column used by a generated column`), on every version pgshift supports; copy-and-swap could build such a table, but it would not be what the statement does.",
            "The statement fails natively; a tool that ran it another way would change the schema in a way PostgreSQL itself does not allow.",
            "Drop the generated column, change the type, and add the generated column again (its stored values are computed again: a rewrite of its own); or leave the type as it is.",
            "ALTER TABLE t DROP COLUMN g;\nALTER TABLE t ALTER COLUMN a TYPE bigint;\nALTER TABLE t ADD COLUMN g bigint GENERATED ALWAYS AS (a * 2) STORED;",
            "pgshift refuses what the server would refuse, before any work, with the server's reason.",
        ),
        RefusalCause::TableNoLongerEmpty => page(
            "A unit planned to run as written on tables that held no rows found one holding rows when it started; nothing of it ran.",
            "Blocking forms on new or empty tables run as written (TX-2): there are no rows to scan or rewrite and no writer to hold up. The emptiness was read when the file was planned; the unit's transaction locks those tables again and reads it once more before its first statement, and here a table had rows by then (something wrote to it in between).",
            "On a table with rows, the blocking form would hold its lock for as long as its scan or rewrite takes, which is what pgshift promises not to do.",
            "Run the command again: planned on the table as it is now, the statement goes by its online route (a safer sequence or copy-and-swap), or is refused with the reason.",
            "",
            "Units that run as written on empty tables say so (`whole_on_empty`); the check at their start makes that true when they run, not only when planned.",
        ),
        RefusalCause::RowSecurityApplies => page(
            "Row-level security applies to the connecting role on the table: the run's reads would see only the rows its policies show.",
            "The table has row-level security enabled, and the connecting role is neither a superuser nor `BYPASSRLS`, and either does not own the table or the table is `FORCE`d; copy-and-swap reads the table to copy and verify it, and runs its sessions with `row_security = off`, under which PostgreSQL raises rather than filter.",
            "Reads through a policy see part of the table; a copy and a verification that both saw the same part would agree, and the swap would drop every row they did not see.",
            "Connect as a superuser or a `BYPASSRLS` role that owns the table, or, as the owner, turn `FORCE` off for the run and on again after it, then run again.",
            "ALTER ROLE app_owner BYPASSRLS;  -- as a superuser\n\
-- or, as the table's owner, for the run only:\n\
ALTER TABLE t NO FORCE ROW LEVEL SECURITY;\n\
-- … pgshift apply …\n\
ALTER TABLE t FORCE ROW LEVEL SECURITY;",
            "pgshift checks row security before a run is recorded, and again on the shadow once the statement has run on it (SE-3).",
        ),
        RefusalCause::InsufficientDiskSpace => page(
            "The file system the run would write the shadow (or WAL) to has less free space than the run's estimated need.",
            "Copy-and-swap writes a second copy of the table and its indexes (plus the WAL of that copy) before it drops the old one; pgshift measured the free space where the server lets it and found less than that need plus a margin (`PGSHIFT_DISK_MARGIN_PERCENT`).",
            "A disk that fills during the copy stops every writer of the database, not just the run.",
            "Free space on that file system, or move the table to a tablespace with room (`SET TABLESPACE` in the statement), then run again.",
            "SELECT pg_size_pretty(pg_total_relation_size('t'));  -- what the copy needs, before the margin",
            "pgshift measures free disk before a run is recorded, and says so when the server does not let it measure.",
        ),
    }
}
