//! The page of every lint code. Recipes use `t` for the table, `c` for the column and
//! `id` for its key.

use super::{Page, PageKind};
use crate::lint::Code;

/// The page of `code`.
pub fn lint_page(code: Code) -> Page {
    let page = Page::builder(
        code.name(),
        PageKind::Lint {
            severity: code.severity(),
        },
    );
    match code {
        Code::TableRewrite => page(
            "A rewrite of an existing table under ACCESS EXCLUSIVE.",
            "PostgreSQL writes a new copy of every row and rebuilds every index while it holds ACCESS EXCLUSIVE: `ALTER COLUMN … TYPE` to a type that is not binary-coercible, `SET TABLESPACE`, `SET LOGGED`/`UNLOGGED`, `VACUUM FULL`, `CLUSTER`, and `ADD COLUMN` of an identity, serial or stored generated column. With `--trace`, a rewrite the server performed inside procedural code (a `DO` block, a function a `SELECT` or `CALL` runs) gets this code too, on the statement that ran it, for each table no earlier statement of its file created.",
            "ACCESS EXCLUSIVE blocks every read and every write of the table until the rewrite commits, for a time that grows with the table: minutes to hours on a large one.",
            "Expand and contract: add a new column, keep it in step with a trigger, backfill it in batches, then swap the names in one short transaction.",
            "-- 1. the new column (catalog only) and a trigger that keeps it in step with writes\n\
ALTER TABLE t ADD COLUMN c_new bigint;\n\
CREATE FUNCTION t_c_sync() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.c_new := NEW.c; RETURN NEW; END $$;\n\
CREATE TRIGGER t_c_sync BEFORE INSERT OR UPDATE ON t FOR EACH ROW EXECUTE FUNCTION t_c_sync();\n\
-- 2. backfill in key ranges, each batch in its own transaction, until every row is done\n\
UPDATE t SET c_new = c WHERE id >= 1 AND id < 10001;\n\
-- 3. rebuild the column's indexes and constraints on c_new (CONCURRENTLY, NOT VALID + VALIDATE), then swap\n\
BEGIN;\n\
SET LOCAL lock_timeout = '2s';\n\
ALTER TABLE t RENAME COLUMN c TO c_old;\n\
ALTER TABLE t RENAME COLUMN c_new TO c;\n\
DROP TRIGGER t_c_sync ON t;\n\
COMMIT;\n\
-- 4. later, once nothing reads it\n\
ALTER TABLE t DROP COLUMN c_old;",
            "`pgshift apply` rewrites the table online through copy-and-swap: a shadow table with the new definition, a chunked copy kept in step with live writes by a capture trigger, an exact verification, then a swap under a short, bounded lock. `--allow-blocking TABLE` runs the blocking form instead.",
        ),
        Code::VolatileDefault => page(
            "`ADD COLUMN` with a volatile default: a rewrite.",
            "A volatile default (`clock_timestamp()`, `random()`, `gen_random_uuid()`, or a function pgshift cannot prove stable) gives every existing row its own value, so PostgreSQL rewrites the table under ACCESS EXCLUSIVE. A constant or stable default (`0`, `now()`) is stored once in the catalog instead (PostgreSQL 11+).",
            "The rewrite blocks every read and write of the table for as long as it takes to copy it.",
            "Add the column without the default, set the default for new rows, then fill the existing rows in batches.",
            "ALTER TABLE t ADD COLUMN c uuid;                            -- catalog only\n\
ALTER TABLE t ALTER COLUMN c SET DEFAULT gen_random_uuid();  -- new rows only, catalog only\n\
-- existing rows in key ranges, each batch in its own transaction\n\
UPDATE t SET c = gen_random_uuid() WHERE id >= 1 AND id < 10001 AND c IS NULL;",
            "`pgshift apply` adds the column online through copy-and-swap (a shadow table, a chunked copy kept in step with live writes, a verification, a short swap); `--allow-blocking TABLE` runs the blocking form instead.",
        ),
        Code::ScanUnderLock => page(
            "A full scan of an existing table under a lock that blocks writes.",
            "The statement reads every row while it holds a lock that blocks writes (and often reads): `REINDEX` without `CONCURRENTLY`, `ATTACH PARTITION` checking the partition bound, `ADD … UNIQUE` or `PRIMARY KEY` building its index.",
            "Writers wait for the whole scan, which grows with the table.",
            "Use the form that does the scan without the strong lock: `CONCURRENTLY`, or a validated `CHECK` constraint that proves a partition's bound before `ATTACH PARTITION`.",
            "-- REINDEX (outside a transaction block)\n\
REINDEX INDEX CONCURRENTLY t_c_idx;\n\
-- ATTACH PARTITION: prove the bound first, so the attach skips its scan\n\
ALTER TABLE t_2025 ADD CONSTRAINT t_2025_bound CHECK (k IS NOT NULL AND k >= 100 AND k < 200) NOT VALID;\n\
ALTER TABLE t_2025 VALIDATE CONSTRAINT t_2025_bound;\n\
ALTER TABLE t ATTACH PARTITION t_2025 FOR VALUES FROM (100) TO (200);\n\
ALTER TABLE t_2025 DROP CONSTRAINT t_2025_bound;",
            "`pgshift apply` runs the safer sequence when one exists (its steps are shown with the finding), each step committed on its own under a bounded lock budget.",
        ),
        Code::IndexNotConcurrent => page(
            "`CREATE INDEX` without `CONCURRENTLY` on an existing table.",
            "A plain `CREATE INDEX` holds SHARE on the table for the whole build.",
            "SHARE blocks every `INSERT`, `UPDATE` and `DELETE` until the index is built; reads continue.",
            "Build it with `CREATE INDEX CONCURRENTLY`, which cannot run inside a transaction block: put it alone in a file whose first line is `-- no-transaction` (or your runner's switch for running a file outside a transaction).",
            "-- no-transaction\n\
CREATE INDEX CONCURRENTLY t_c_idx ON t (c);\n\
-- a failed or interrupted build leaves an INVALID index of that name: drop it, then build again\n\
DROP INDEX CONCURRENTLY IF EXISTS t_c_idx;",
            "`pgshift apply` builds it `CONCURRENTLY`, outside any transaction, with a long lock_timeout because the build blocks no reader or writer; an invalid index already under the name is reported, never dropped, and an invalid index left by its own failed attempt is dropped and built again.",
        ),
        Code::IndexOnPartitionedParent => page(
            "An index built on a partitioned parent, where `CONCURRENTLY` is not allowed.",
            "`CREATE INDEX` on a partitioned table builds the index of every partition under SHARE, and PostgreSQL does not accept `CONCURRENTLY` on a partitioned table.",
            "Writes to every partition wait for the whole build of all of them.",
            "Create the parent's index `ON ONLY` the parent (catalog only, invalid at first), build each partition's index `CONCURRENTLY`, and attach each one; the parent's index becomes valid when every partition has one.",
            "CREATE INDEX t_c_idx ON ONLY t (c);\n\
-- for each partition, outside a transaction block\n\
CREATE INDEX CONCURRENTLY t_2025_c_idx ON t_2025 (c);\n\
ALTER INDEX t_c_idx ATTACH PARTITION t_2025_c_idx;",
            "`pgshift apply` runs exactly that sequence, one partition at a time (one level of partitioning).",
        ),
        Code::ConstraintWithoutNotValid => page(
            "A `CHECK` or `FOREIGN KEY` added without `NOT VALID`.",
            "Adding a `CHECK` constraint scans every row under ACCESS EXCLUSIVE; adding a `FOREIGN KEY` scans under SHARE ROW EXCLUSIVE on both tables.",
            "Reads (for a `CHECK`) and writes wait for the whole scan.",
            "Add the constraint `NOT VALID` (catalog only; new rows are checked from then on), then `VALIDATE` it in its own transaction, which takes SHARE UPDATE EXCLUSIVE: reads and writes continue.",
            "ALTER TABLE t ADD CONSTRAINT t_c_positive CHECK (c > 0) NOT VALID;\n\
ALTER TABLE t VALIDATE CONSTRAINT t_c_positive;\n\
ALTER TABLE t ADD CONSTRAINT t_u_fkey FOREIGN KEY (u) REFERENCES u (id) NOT VALID;\n\
ALTER TABLE t VALIDATE CONSTRAINT t_u_fkey;",
            "`pgshift apply` runs the `NOT VALID` step and the `VALIDATE` step, each committed on its own under its lock budget.",
        ),
        Code::SetNotNull => page(
            "`SET NOT NULL` directly, which scans under ACCESS EXCLUSIVE.",
            "`ALTER COLUMN … SET NOT NULL` reads every row under ACCESS EXCLUSIVE to prove there is no NULL, unless a validated `CHECK (c IS NOT NULL)` already proves it (PostgreSQL 12+).",
            "Every read and write of the table waits for the scan.",
            "Prove it with a check first: add `CHECK (c IS NOT NULL) NOT VALID`, validate it, then `SET NOT NULL` (no scan) and drop the check.",
            "ALTER TABLE t ADD CONSTRAINT t_c_not_null CHECK (c IS NOT NULL) NOT VALID;\n\
ALTER TABLE t VALIDATE CONSTRAINT t_c_not_null;  -- reads and writes continue\n\
ALTER TABLE t ALTER COLUMN c SET NOT NULL;       -- no scan: the check proves it\n\
ALTER TABLE t DROP CONSTRAINT t_c_not_null;",
            "`pgshift apply` runs that sequence, each step committed on its own.",
        ),
        Code::NotNullWithoutDefault => page(
            "`ADD COLUMN … NOT NULL` with no default: it fails unless the table is empty.",
            "Every existing row would hold NULL in the new column, so PostgreSQL rejects the statement with `column … contains null values` (SQLSTATE 23502) unless the table has no rows; on an empty table it still checks under ACCESS EXCLUSIVE.",
            "The migration passes on an empty development or CI database and fails in production, where the table has rows.",
            "Add the column nullable, give it a default for new rows, backfill the existing rows in batches, then add `CHECK (c IS NOT NULL) NOT VALID`, `VALIDATE` it and `SET NOT NULL`; or add it with a constant default (`NOT NULL DEFAULT 0` is catalog only).",
            "ALTER TABLE t ADD COLUMN c int;                 -- catalog only\n\
ALTER TABLE t ALTER COLUMN c SET DEFAULT 0;      -- new rows get a value\n\
-- backfill in key ranges, each batch in its own transaction\n\
UPDATE t SET c = 0 WHERE id >= 1 AND id < 10001 AND c IS NULL;\n\
ALTER TABLE t ADD CONSTRAINT t_c_not_null CHECK (c IS NOT NULL) NOT VALID;\n\
ALTER TABLE t VALIDATE CONSTRAINT t_c_not_null;  -- reads and writes continue\n\
ALTER TABLE t ALTER COLUMN c SET NOT NULL;       -- no scan: the check proves it\n\
ALTER TABLE t DROP CONSTRAINT t_c_not_null;",
            "`pgshift plan` and `pgshift apply` refuse it (`null-in-existing-rows`) when the live table has rows, before anything runs; on an empty table it runs as written.",
        ),
        Code::NotInTransaction => page(
            "A statement that cannot run inside a transaction block, placed in one.",
            "`CREATE INDEX CONCURRENTLY`, `DROP INDEX CONCURRENTLY`, `REINDEX … CONCURRENTLY`, `DETACH PARTITION … CONCURRENTLY`, `VACUUM` and a few others refuse to run inside a transaction block, and this one runs in one: the runner's transaction around the file, or an explicit `BEGIN`.",
            "The migration fails when it is deployed, with `… cannot run inside a transaction block` (SQLSTATE 25001).",
            "Make `-- no-transaction` the file's first line (sqlx's marker; other runners have their own switch), or move the statement to a file of its own that runs outside a transaction.",
            "-- no-transaction\n\
CREATE INDEX CONCURRENTLY t_c_idx ON t (c);",
            "`pgshift apply` and `pgshift migrate` run such a statement on its own, outside any transaction, whatever the file looks like.",
        ),
        Code::TwoPhaseCommit => page(
            "Two-phase commit in a migration.",
            "`PREPARE TRANSACTION` detaches a transaction from its session: it keeps its locks until someone runs `COMMIT PREPARED` or `ROLLBACK PREPARED`.",
            "A forgotten prepared transaction holds its locks on the table indefinitely and keeps vacuum from removing dead rows everywhere.",
            "Remove the two-phase commit from the migration and let it commit normally.",
            "-- find prepared transactions left behind, then end them\n\
SELECT gid, prepared, owner, database FROM pg_prepared_xacts;\n\
ROLLBACK PREPARED 'the-gid';",
            "pgshift refuses it (`two-phase-commit`).",
        ),
        Code::BlockingLock => page(
            "A brief lock that still blocks reads or writes on an existing table.",
            "The change itself is quick (catalog only), but it needs a lock that blocks reads or writes, often ACCESS EXCLUSIVE: `ADD COLUMN` without a default, `DROP COLUMN`, `SET DEFAULT`, `DETACH PARTITION`, `LOCK TABLE`.",
            "While the statement waits for its lock behind a long transaction, every later query on the table queues behind it: a brief lock can stall the application for as long as the oldest transaction runs.",
            "Run it under a short `lock_timeout` and retry when the lock is not granted in time.",
            "SET lock_timeout = '2s';\n\
ALTER TABLE t ADD COLUMN c text;\n\
-- on \"canceling statement due to lock timeout\" (SQLSTATE 55P03): wait a little and run it again",
            "`pgshift apply` takes the lock under a short lock_timeout (1 s by default) and retries with jittered backoff (10 attempts by default).",
        ),
        Code::MissingLockTimeout => page(
            "A strong lock taken with no `lock_timeout` set: it can queue behind a long transaction and stall every query behind it.",
            "A statement that takes SHARE or stronger on an existing table runs with no `lock_timeout` in force, so it waits for its lock as long as it takes.",
            "While it waits, every query that conflicts with the requested lock queues behind it, reads included for ACCESS EXCLUSIVE.",
            "Set a lock timeout at the top of the file (or `SET LOCAL` inside a transaction), and retry the migration when it times out.",
            "SET lock_timeout = '2s';",
            "`pgshift apply` and `pgshift migrate` set a lock_timeout on every step and retry on lock timeouts and deadlocks; a `SET lock_timeout` in the file is not run, since pgshift's budgets govern every step.",
        ),
        Code::LocksAccumulated => page(
            "A transaction that holds blocking locks across later statements.",
            "A lock is held until its transaction ends. This transaction (the runner's around the file, or an explicit `BEGIN`) takes a lock that blocks writes and then runs more statements before it commits.",
            "Every later statement extends the time writers wait; locks on several tables also make deadlocks with the application likely.",
            "Commit each blocking change on its own: split the file, or mark it `-- no-transaction` so each statement commits by itself.",
            "-- no-transaction\n\
SET lock_timeout = '2s';\n\
ALTER TABLE a ADD COLUMN x int;  -- commits on its own\n\
ALTER TABLE b ADD COLUMN y int;  -- commits on its own",
            "`pgshift apply` and `pgshift migrate` commit each statement (each step of a safer sequence) in its own bounded transaction, outside explicit `BEGIN … COMMIT` blocks.",
        ),
        Code::DmlWithDdl => page(
            "Data changes in the same transaction as schema changes.",
            "An `INSERT`, `UPDATE`, `DELETE` or `MERGE` runs in the same transaction as a schema change to an existing table.",
            "The schema change's lock (often ACCESS EXCLUSIVE) is held while the data changes, and the changed rows stay locked until the end.",
            "Move the data change (the backfill) to a migration of its own, batched by key range, each batch committed on its own.",
            "-- migration 1: the schema change\n\
ALTER TABLE t ADD COLUMN c int;\n\
-- migration 2 (-- no-transaction): the backfill, one key range per transaction\n\
UPDATE t SET c = 0 WHERE id >= 1 AND id < 10001 AND c IS NULL;",
            "`pgshift apply` splits such a file into separate bounded transactions when that keeps its meaning, and refuses an explicit block whose meaning depends on being one transaction (`not-splittable`).",
        ),
        Code::TriggerChange => page(
            "`CREATE TRIGGER` or `DROP TRIGGER` on an existing table.",
            "`CREATE TRIGGER` takes SHARE ROW EXCLUSIVE and `DROP TRIGGER` ACCESS EXCLUSIVE on the table; from the commit on, every write runs the new behaviour.",
            "The lock is brief once granted, but writers queue behind it while it waits; and every write of every session changes behaviour at once.",
            "Create the trigger's function first, test it, and take the lock under a short `lock_timeout`, retrying when it is not granted.",
            "SET lock_timeout = '2s';\n\
CREATE TRIGGER t_audit AFTER INSERT OR UPDATE ON t FOR EACH ROW EXECUTE FUNCTION t_audit();",
            "`pgshift apply` takes the lock under a short lock_timeout and retries with jittered backoff.",
        ),
        Code::OriginInvariantTrigger => page(
            "An invariant-looking trigger left ORIGIN-enabled: replica-role sessions skip it.",
            "A constraint trigger, a `BEFORE … FOR EACH ROW` trigger or a trigger whose function raises errors is left `ENABLE` (ORIGIN, the default). Sessions with `session_replication_role = replica`, such as logical replication's apply workers and some restore and sync tools, do not fire ORIGIN triggers.",
            "Writes from those sessions bypass the rule the trigger enforces.",
            "Make it fire for every session with `ENABLE ALWAYS TRIGGER`.",
            "ALTER TABLE t ENABLE ALWAYS TRIGGER t_check;",
            "pgshift only reports it; copy-and-swap's own capture trigger is ALWAYS-enabled for the same reason.",
        ),
        Code::TriggerFunctionReplaced => page(
            "`CREATE OR REPLACE FUNCTION` of a trigger function: every trigger calling it changes behaviour at once.",
            "Replacing a function that triggers call changes what every one of those triggers does, on every table, from the moment the statement commits.",
            "A mistake reaches every row written by every session at once, on tables the migration does not name.",
            "Review every trigger that calls the function; to roll out gradually, create a new function and move triggers to it one at a time.",
            "SELECT tgrelid::regclass AS table_name, tgname FROM pg_trigger WHERE tgfoid = 't_audit'::regproc;\n\
CREATE FUNCTION t_audit_v2() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;\n\
CREATE OR REPLACE TRIGGER t_audit AFTER INSERT OR UPDATE ON t FOR EACH ROW EXECUTE FUNCTION t_audit_v2();",
            "pgshift runs it as written (it is catalog only) and reports it so a person reviews it.",
        ),
        Code::PartitionRangeRemoved => page(
            "`DETACH PARTITION` with no default partition: inserts into the detached range start failing.",
            "After the detach, no partition of the table accepts the detached partition's key range.",
            "Every insert of a row in that range fails with `no partition of relation … found for row` (SQLSTATE 23514).",
            "Attach or create a partition for that range in the same change, or make sure nothing writes rows in it any more.",
            "-- outside a transaction block; takes SHARE UPDATE EXCLUSIVE, reads and writes continue\n\
ALTER TABLE t DETACH PARTITION t_2024 CONCURRENTLY;\n\
-- if rows of that range may still arrive, give them a partition\n\
CREATE TABLE t_2024_late PARTITION OF t FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');",
            "`pgshift apply` runs `DETACH … CONCURRENTLY` on its own outside a transaction; it does not add a partition for you.",
        ),
        Code::Destructive => page(
            "Data or objects dropped for good.",
            "`DROP TABLE`, `DROP COLUMN`, `TRUNCATE` and similar statements remove data that no rollback of the application brings back.",
            "Application code still deployed that reads the dropped object starts failing, and the data is gone unless a backup has it.",
            "Ship the application change that stops using the object first, check a backup exists, and drop in a later migration.",
            "-- a later migration, once no deployed code uses the column\n\
SET lock_timeout = '2s';\n\
ALTER TABLE t DROP COLUMN c;",
            "`pgshift apply` runs it under a short, bounded lock (it is catalog only) and reports that it destroys data; it does not keep a copy.",
        ),
        Code::BreakingRename => page(
            "A rename that breaks applications still using the old name.",
            "`RENAME` of a table or column and `SET SCHEMA` take effect at the commit; every query that still uses the old name fails from then on.",
            "Application instances deployed before the change (and any other client) start failing until they are updated.",
            "Expand, then contract: add the new name alongside the old one (a view for a table, a column kept in step for a column), move the applications, then remove the old name.",
            "-- a table: rename it and keep the old name as a view (simple views are updatable)\n\
BEGIN;\n\
SET LOCAL lock_timeout = '2s';\n\
ALTER TABLE t RENAME TO t_new;\n\
CREATE VIEW t AS SELECT * FROM t_new;\n\
COMMIT;\n\
-- once no application uses the old name\n\
DROP VIEW t;",
            "`pgshift apply` runs it under a bounded lock; it does not make the rename compatible for you.",
        ),
        Code::ReplicationRoleReplica => page(
            "`session_replication_role = replica` in a migration: triggers and foreign keys stop firing for the session.",
            "In a session with `session_replication_role = replica`, ORIGIN-enabled triggers, foreign-key checks included, do not fire.",
            "What the migration writes afterwards is not checked by the rules those triggers enforce, and nothing reports it.",
            "Remove the setting; if one trigger must not fire during a backfill, disable that trigger explicitly and enable it again afterwards.",
            "SET lock_timeout = '2s';\n\
ALTER TABLE t DISABLE TRIGGER t_audit;\n\
UPDATE t SET c = 0 WHERE id >= 1 AND id < 10001;\n\
ALTER TABLE t ENABLE TRIGGER t_audit;",
            "`pgshift apply` refuses `SET session_replication_role = replica`.",
        ),
        Code::OpaqueCode => page(
            "Procedural code (`DO`, `CALL`) whose locks cannot be known.",
            "A `DO` block or a procedure runs statements that are only known when it runs, so their locks and their work cannot be judged before.",
            "Anything could happen under any lock, for any time: a rewrite, a scan, a long data change.",
            "Run `pgshift lint --trace` to see what it really does, or write the statements the block runs as plain SQL in the migration, so each can be judged.",
            "",
            "Offline, pgshift refuses it (`opaque-procedural-code`); `plan`, `apply` and `migrate` trace it on a clone of the target and run it by the trace: natively, expanded into the statements it executed, or refused (docs/EXECUTION.md, Procedural code).",
        ),
        Code::Unclassified => page(
            "A statement pgshift does not classify.",
            "pgshift does not know this statement form, so it cannot say which locks it takes or how heavy its work is.",
            "Its locks and duration are unknown; it might block the table for a long time.",
            "Look up the lock it takes in PostgreSQL's documentation and run it under a short `lock_timeout`; once reviewed, exempt it with `-- pgshift:allow unclassified`.",
            "SET lock_timeout = '2s';",
            "pgshift refuses it (`unclassified-statement`).",
        ),
        Code::NoStatements => page(
            "A file with no statements.",
            "The file is empty or holds only comments.",
            "Some migration runners fail on an empty file, and an empty migration is often a mistake (a file saved before it was written).",
            "Write the migration's SQL into the file, or delete the file.",
            "",
            "pgshift has nothing to run in it and only reports it.",
        ),
        Code::UnbatchedDataChange => page(
            "An `UPDATE` or `DELETE` of every row in one transaction.",
            "An `UPDATE` or `DELETE` without a `WHERE` clause changes every row of the table in one transaction.",
            "Every changed row stays locked until the commit, so writers of those rows wait; the table bloats by a full copy of its rows, and replicas lag behind.",
            "Batch it by key range, each batch in its own transaction.",
            "-- repeat, each in its own transaction, until it changes no row\n\
UPDATE t SET c = 0 WHERE id IN (SELECT id FROM t WHERE c IS NULL ORDER BY id LIMIT 10000);",
            "`pgshift apply` runs it as written in one bounded transaction (its statement_timeout stops it if it runs too long); it does not batch it for you.",
        ),
    }
}
