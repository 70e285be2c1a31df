//! Helpers of the copy-and-swap tests: options small enough for tests, a progress
//! hook that acts at a phase (to tamper, to hold a lock, to change a shadow row), and
//! readers of what a run leaves behind.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pgshift::cas::{self, CasProgress, CutoverBudgets, Mode, Phase, RunOptions, ThrottleLimits};
use pgshift::connect::ConnectionSpec;
use pgshift_sql::QualifiedName;

use super::cluster;

/// Options for test runs: two workers, small chunks, short cutover budgets.
pub fn options(mode: Mode) -> RunOptions {
    RunOptions {
        disk_room: None,
        mode,
        workers: 2,
        chunk_target_ms: 200,
        first_chunk_rows: 2_000,
        cutover: CutoverBudgets {
            lock_timeout_ms: 500,
            attempts: 10,
            backoff_initial_ms: 50,
            backoff_max_ms: 500,
            max_drain: 50_000,
        },
        keep_old: false,
        repair: false,
        defer_cutover: false,
        // The throttle's signals consulted by the throttle's own tests only: on a
        // shared, loaded test machine the default writer-latency limit would pace
        // every other test.
        throttle: ThrottleLimits {
            max_replica_lag_ms: None,
            max_writer_p99_ms: None,
            max_writer_slowdown: None,
            max_wal_bytes_per_s: None,
            ..ThrottleLimits::default()
        },
        verify: Default::default(),
    }
}

/// The connection spec of `db`.
pub fn spec(db: &str) -> ConnectionSpec {
    ConnectionSpec::parse(&cluster().connection_string(db)).expect("spec")
}

/// The connection spec of `db` as `role` (the cluster trusts local connections).
pub fn spec_as(db: &str, role: &str) -> ConnectionSpec {
    let conninfo = cluster().connection_string(db).replace(
        &format!("user={}", cluster().superuser()),
        &format!("user={role}"),
    );
    ConnectionSpec::parse(&conninfo).expect("spec")
}

/// Starts a run of `sql` on `table` as `role` and carries it to its end.
pub async fn run_as(
    db: &str,
    role: &str,
    table: &QualifiedName,
    sql: &str,
    options: RunOptions,
) -> Result<cas::RunReport, cas::CasError> {
    let statements = pgshift_sql::parse(sql).expect("valid");
    cas::start(
        &spec_as(db, role),
        &statements[0],
        table,
        options,
        &mut cas::Silent,
    )
    .await
}

/// Starts a run of `sql` on `table` and carries it to its end.
pub async fn run(
    db: &str,
    table: &str,
    sql: &str,
    options: RunOptions,
    progress: &mut dyn CasProgress,
) -> Result<cas::RunReport, cas::CasError> {
    let statements = pgshift_sql::parse(sql).expect("valid");
    cas::start(
        &spec(db),
        &statements[0],
        &QualifiedName::bare(table),
        options,
        progress,
    )
    .await
}

/// Resumes the active run on `table`.
pub async fn resume(db: &str, table: &str) -> Result<cas::RunReport, cas::CasError> {
    cas::resume(&spec(db), &QualifiedName::bare(table), &mut cas::Silent).await
}

/// Aborts the active run on `table`.
pub async fn abort(db: &str, table: &str) -> Result<i64, cas::CasError> {
    cas::abort(&spec(db), &QualifiedName::bare(table)).await
}

/// `t.v` is `varchar(100)` now and every one of `rows` rows still reads `row <id>`:
/// the type change of the throttle and standby tests, swapped.
pub fn assert_varchar_rewrite(db: &str, rows: i64) {
    assert_eq!(
        value(db, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 't'::regclass AND attname = 'v'"),
        "character varying(100)"
    );
    assert_eq!(
        value(db, "SELECT count(*) FROM t WHERE v = 'row ' || id"),
        rows.to_string()
    );
}

/// One value read with psql.
pub fn value(db: &str, sql: &str) -> String {
    cluster().psql(db, sql).expect("query").trim().to_owned()
}

/// A copy of `db` made by the server (`CREATE DATABASE … TEMPLATE`), named
/// `{db}_{suffix}`: the oracle's side of a comparison. Retried while another session
/// (autovacuum) is briefly connected to `db`.
pub fn clone_database(db: &str, suffix: &str) -> String {
    let name = format!("{db}_{suffix}");
    for _ in 0..50 {
        match cluster().psql("postgres", &format!("CREATE DATABASE {name} TEMPLATE {db}")) {
            Ok(_) => return name,
            Err(e) if e.to_string().contains("being accessed by other users") => {
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => panic!("cloning {db}: {e}"),
        }
    }
    panic!("{db} stayed in use; it could not be cloned")
}

/// How many runs are recorded (none when the engine's run table was never created:
/// a refusal before anything is recorded creates nothing).
pub fn runs_recorded(db: &str) -> i64 {
    if value(db, "SELECT to_regclass('pgshift.runs') IS NULL") == "t" {
        return 0;
    }
    value(db, "SELECT count(*) FROM pgshift.runs")
        .parse()
        .expect("a count")
}

/// The OID of a relation, as text.
pub fn oid(db: &str, relation: &str) -> String {
    value(db, &format!("SELECT '{relation}'::regclass::oid"))
}

/// The newest run's number.
pub fn run_id(db: &str) -> i64 {
    value(db, "SELECT max(id) FROM pgshift.runs")
        .parse()
        .expect("a run was recorded")
}

/// The newest run's phase (and resume phase, when failed).
pub fn run_phase(db: &str) -> String {
    value(
        db,
        "SELECT phase || coalesce('/' || resume_phase, '') FROM pgshift.runs ORDER BY id DESC LIMIT 1",
    )
}

/// Waits (up to a minute) until the newest run is in `phase`.
pub async fn wait_for_phase(db: &str, phase: &str) {
    for _ in 0..600 {
        let current = cluster()
            .psql(
                db,
                "SELECT phase FROM pgshift.runs ORDER BY id DESC LIMIT 1",
            )
            .unwrap_or_default();
        if current.trim() == phase {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the run never reached {phase}: {}", run_phase(db));
}

/// Everything a run may leave behind: shadow and old relations, the engine's tables
/// (other than the run record) and functions, its triggers. Empty when clean.
pub fn artifacts(db: &str) -> String {
    value(
        db,
        "SELECT coalesce(string_agg(x, ','), '') FROM ( \
           SELECT relname::text AS x FROM pg_class WHERE relname LIKE '\\_pgshift%' \
           UNION ALL SELECT 'table:' || relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                      WHERE nspname = 'pgshift' AND relname NOT LIKE 'runs%' AND relname NOT LIKE 'migrations%' AND relname NOT LIKE 'throttle\\_probe%' \
           UNION ALL SELECT 'function:' || proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE nspname = 'pgshift' \
           UNION ALL SELECT 'trigger:' || tgname FROM pg_trigger WHERE tgname LIKE 'pgshift\\_%') a",
    )
}

/// A progress that runs an action once, synchronously, when the run enters a phase
/// (before the phase's work starts), and records the phases seen.
pub struct Hook {
    at: Phase,
    action: Option<Box<dyn FnOnce() + Send>>,
    /// The phases entered, in order.
    pub phases: Arc<Mutex<Vec<Phase>>>,
}

impl Hook {
    /// Runs `action` when the run enters `at`.
    pub fn new(at: Phase, action: impl FnOnce() + Send + 'static) -> Self {
        Hook {
            at,
            action: Some(Box::new(action)),
            phases: Arc::new(Mutex::new(Vec::new())),
        }
    }
}

impl CasProgress for Hook {
    fn phase(&mut self, phase: Phase) {
        self.phases.lock().expect("phases").push(phase);
        if phase == self.at {
            if let Some(action) = self.action.take() {
                action();
            }
        }
    }
    fn copied(&mut self, _rows: i64, _estimate: i64, _backlog: i64) {}
    fn verified(&mut self, _rows: i64, _estimate: i64) {}
    fn note(&mut self, _text: &str) {}
}

/// A session holding locks on a thread (and runtime) of its own, so that it can be
/// started from a synchronous [`Hook`] without blocking the run's runtime.
pub struct LockHolder {
    release: std::sync::mpsc::Sender<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LockHolder {
    /// Runs `sql` (typically `BEGIN; LOCK …`) on a new session and returns once it has
    /// completed; the transaction stays open until [`LockHolder::release`].
    pub fn hold(db: &str, sql: &str) -> LockHolder {
        let (ready, wait_ready) = std::sync::mpsc::channel::<Result<(), String>>();
        let (release, wait_release) = std::sync::mpsc::channel::<()>();
        let (conninfo, sql) = (cluster().connection_string(db), sql.to_owned());
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let (client, connection) =
                    match tokio_postgres::connect(&conninfo, tokio_postgres::NoTls).await {
                        Ok(pair) => pair,
                        Err(e) => {
                            let _ = ready.send(Err(e.to_string()));
                            return;
                        }
                    };
                tokio::spawn(connection);
                let held = client.batch_execute(&sql).await.map_err(|e| e.to_string());
                let ok = held.is_ok();
                let _ = ready.send(held);
                if ok {
                    let _ = tokio::task::spawn_blocking(move || wait_release.recv()).await;
                    let _ = client.batch_execute("COMMIT").await;
                }
            });
        });
        wait_ready
            .recv()
            .expect("the holder answers")
            .expect("the lock is held");
        LockHolder {
            release,
            thread: Some(thread),
        }
    }

    /// Ends the holder's transaction.
    pub fn release(mut self) {
        let _ = self.release.send(());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The server's `server_version_num`.
pub fn server_version(db: &str) -> i32 {
    value(db, "SHOW server_version_num")
        .parse()
        .expect("a version number")
}

/// Gives `table` (in `public`) to `role` with what a copy-and-swap run of it needs: the
/// table, `CREATE` on the database and on `public`, and pgshift's own schema.
pub fn give_table(db: &str, table: &str, role: &str) {
    cluster()
        .psql(
            db,
            &format!(
                "ALTER TABLE {table} OWNER TO {role}; GRANT CREATE ON DATABASE \"{db}\" TO {role}; \
                 GRANT CREATE ON SCHEMA public TO {role}; CREATE SCHEMA pgshift AUTHORIZATION {role};"
            ),
        )
        .expect("the table given to the role");
}

/// Creates `roles` if they do not exist yet (roles are shared by every database of
/// the cluster, and tests run at once).
pub fn ensure_roles(db: &str, roles: &[&str]) {
    for role in roles {
        cluster()
            .psql(
                db,
                &format!(
                    "DO $$ BEGIN CREATE ROLE {role}; \
                     EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"
                ),
            )
            .expect("role");
    }
}

/// Everything about `table` and its partitions that a swap must carry, one fact per
/// line, sorted, by name (never by OID): each relation (kind, persistence, owner,
/// tablespace, replica identity, row security flags, storage parameters of the table
/// and of its TOAST table, access method, comment, grants, partition key and bound);
/// each column (type, not-null, default, generation, identity, statistics target,
/// storage, compression, collation, options, comment, grants); each index
/// (`pg_get_indexdef`, tablespace, clustered, replica identity, validity, comment);
/// each constraint (`pg_get_constraintdef`, validated, comment); each user trigger
/// (`tgenabled`, `pg_get_triggerdef`, comment); each policy; publication membership
/// (with row filter and column list from PostgreSQL 15); the sequence behind each
/// column of the parent (name, parameters, owner, grants, comment); extended
/// statistics (definition, target, comment). Column options leave out `pg_attver`,
/// which Debian's PostgreSQL 15.20 assigns to every column itself (a new value on
/// every rewrite, the native `ALTER` included), so it is no part of a table's
/// identity that pgshift could keep.
pub fn identity(db: &str, table: &str) -> String {
    let version = server_version(db);
    let publication = if version >= 150000 {
        "format(' where=%s columns=%s', pg_get_expr(r.prqual, r.prrelid), r.prattrs)"
    } else {
        "''"
    };
    let stattarget = "coalesce(a.attstattarget::int, -1)";
    let acl = |column: &str| {
        format!("(SELECT string_agg(x::text, ',' ORDER BY x::text) FROM unnest({column}) x)")
    };
    let sql = format!(
        "WITH tree AS ( \
           SELECT '{table}'::regclass::oid AS oid \
           UNION ALL SELECT inhrelid FROM pg_inherits WHERE inhparent = '{table}'::regclass), \
         lines AS ( \
           SELECT format('relation %s kind=%s persistence=%s owner=%s tablespace=%s replident=%s rls=%s/%s options=%s toast_options=%s am=%s comment=%s acl=%s partkey=%s bound=%s', \
                         c.relname, c.relkind, c.relpersistence, pg_get_userbyid(c.relowner), coalesce(ts.spcname, '-'), c.relreplident, \
                         c.relrowsecurity, c.relforcerowsecurity, c.reloptions, tc.reloptions, am.amname, obj_description(c.oid, 'pg_class'), \
                         {relacl}, CASE WHEN c.relkind = 'p' THEN pg_get_partkeydef(c.oid) END, pg_get_expr(c.relpartbound, c.oid)) AS line \
             FROM tree JOIN pg_class c ON c.oid = tree.oid LEFT JOIN pg_tablespace ts ON ts.oid = c.reltablespace \
             LEFT JOIN pg_class tc ON tc.oid = c.reltoastrelid LEFT JOIN pg_am am ON am.oid = c.relam \
           UNION ALL SELECT format('column %s.%s %s notnull=%s default=%s generated=%s identity=%s stattarget=%s storage=%s compression=%s collation=%s options=%s comment=%s acl=%s', \
                         c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, \
                         regexp_replace(pg_get_expr(d.adbin, d.adrelid), '\\s+', ' ', 'g'), a.attgenerated, a.attidentity, {stattarget}, \
                         a.attstorage, a.attcompression, co.collname, \
                         (SELECT array_agg(o ORDER BY o) FROM unnest(a.attoptions) o WHERE o NOT LIKE 'pg\\_attver=%'), \
                         col_description(c.oid, a.attnum), {attacl}) \
             FROM tree JOIN pg_class c ON c.oid = tree.oid JOIN pg_attribute a ON a.attrelid = c.oid \
             LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum LEFT JOIN pg_collation co ON co.oid = a.attcollation \
            WHERE a.attnum > 0 AND NOT a.attisdropped \
           UNION ALL SELECT format('index %s.%s %s tablespace=%s clustered=%s replident=%s valid=%s comment=%s', \
                         c.relname, ic.relname, pg_get_indexdef(i.indexrelid), coalesce(ts.spcname, '-'), i.indisclustered, i.indisreplident, \
                         i.indisvalid, obj_description(i.indexrelid, 'pg_class')) \
             FROM tree JOIN pg_class c ON c.oid = tree.oid JOIN pg_index i ON i.indrelid = c.oid JOIN pg_class ic ON ic.oid = i.indexrelid \
             LEFT JOIN pg_tablespace ts ON ts.oid = ic.reltablespace \
           UNION ALL SELECT format('constraint %s.%s %s %s validated=%s comment=%s', c.relname, con.conname, con.contype, \
                         pg_get_constraintdef(con.oid), con.convalidated, obj_description(con.oid, 'pg_constraint')) \
             FROM tree JOIN pg_class c ON c.oid = tree.oid JOIN pg_constraint con ON con.conrelid = c.oid \
           UNION ALL SELECT format('trigger %s.%s %s %s comment=%s', c.relname, t.tgname, t.tgenabled, pg_get_triggerdef(t.oid), \
                         obj_description(t.oid, 'pg_trigger')) \
             FROM tree JOIN pg_class c ON c.oid = tree.oid JOIN pg_trigger t ON t.tgrelid = c.oid WHERE NOT t.tgisinternal \
           UNION ALL SELECT format('policy %s.%s permissive=%s cmd=%s roles=%s using=%s check=%s comment=%s', c.relname, p.polname, \
                         p.polpermissive, p.polcmd, (SELECT string_agg(CASE WHEN r = 0 THEN 'public' ELSE pg_get_userbyid(r)::text END, ',' ORDER BY 1) FROM unnest(p.polroles) r), \
                         pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid), obj_description(p.oid, 'pg_policy')) \
             FROM tree JOIN pg_class c ON c.oid = tree.oid JOIN pg_policy p ON p.polrelid = c.oid \
           UNION ALL SELECT format('publication %s %s', pub.pubname, c.relname) || {publication} \
             FROM tree JOIN pg_class c ON c.oid = tree.oid JOIN pg_publication_rel r ON r.prrelid = c.oid JOIN pg_publication pub ON pub.oid = r.prpubid \
           UNION ALL SELECT format('sequence %s.%s %s type=%s start=%s increment=%s min=%s max=%s cache=%s cycle=%s owner=%s acl=%s comment=%s', \
                         c.relname, a.attname, s.oid::regclass, format_type(q.seqtypid, NULL), q.seqstart, q.seqincrement, q.seqmin, q.seqmax, q.seqcache, \
                         q.seqcycle, pg_get_userbyid(s.relowner), {seqacl}, obj_description(s.oid, 'pg_class')) \
             FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid \
             CROSS JOIN LATERAL (SELECT pg_get_serial_sequence(c.oid::regclass::text, a.attname)::regclass AS seq) g \
             JOIN pg_class s ON s.oid = g.seq JOIN pg_sequence q ON q.seqrelid = s.oid \
            WHERE c.oid = '{table}'::regclass AND a.attnum > 0 AND NOT a.attisdropped \
           UNION ALL SELECT format('statistics %s.%s %s target=%s comment=%s', n.nspname, s.stxname, pg_get_statisticsobjdef(s.oid), \
                         s.stxstattarget, obj_description(s.oid, 'pg_statistic_ext')) \
             FROM tree JOIN pg_statistic_ext s ON s.stxrelid = tree.oid JOIN pg_namespace n ON n.oid = s.stxnamespace) \
         SELECT string_agg(line, E'\\n' ORDER BY line) FROM lines",
        relacl = acl("c.relacl"),
        attacl = acl("a.attacl"),
        seqacl = acl("s.relacl"),
    );
    value(db, &sql)
}

/// Compares two identities line by line; the message lists what is missing from
/// `actual` and what it has in excess.
pub fn assert_same_identity(expected: &[String], actual: &str, what: &str) {
    let actual: Vec<String> = actual.lines().map(str::to_owned).collect();
    let missing: Vec<&String> = expected.iter().filter(|l| !actual.contains(l)).collect();
    let extra: Vec<&String> = actual.iter().filter(|l| !expected.contains(l)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{what}: identity changed\nmissing: {missing:#?}\nextra: {extra:#?}"
    );
}

/// `before`'s lines, each passed through `edit` (`None` drops the line).
pub fn edited(before: &str, edit: impl Fn(&str) -> Option<String>) -> Vec<String> {
    before.lines().filter_map(edit).collect()
}
