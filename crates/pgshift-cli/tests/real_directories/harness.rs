//! The harness of `real_directories.rs`: the manifest, the fetched directories
//! (`scripts/corpora`), a copy of a directory with its runner's substitutions, the
//! native run as the runner wraps the files, pgshift's run with its stops, and the
//! schema dumps that are compared.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::common::{pgshift, workspace_root};
use pgshift_embedded::{shared_cluster, Cluster};
use serde::Deserialize;
use serde_json::Value;

/// The manifest, relative to the workspace root.
pub(crate) const MANIFEST: &str = "crates/pgshift-cli/tests/data/real_directories.json";

#[derive(Deserialize)]
pub(crate) struct Manifest {
    pub(crate) directories: Vec<Entry>,
}

/// One directory of the manifest (the fields the harness uses; `runner`, `order`
/// and the package's coordinates are for people and for `scripts/corpora`).
#[derive(Deserialize)]
pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) files: usize,
    pub(crate) layout: Layout,
    pub(crate) order: String,
    pub(crate) transaction: Transaction,
    #[serde(default)]
    pub(crate) setup: String,
    #[serde(default)]
    pub(crate) prelude: String,
    #[serde(default)]
    pub(crate) substitute: Vec<(String, String)>,
    #[serde(default)]
    pub(crate) only: Option<String>,
    pub(crate) history: Vec<String>,
    #[serde(default)]
    pub(crate) history_import: Option<String>,
    #[serde(default)]
    pub(crate) native_fails: Option<NativeFailure>,
    pub(crate) expect: Vec<Expected>,
}

/// From which server the directory does not run natively, in which file and how.
#[derive(Deserialize)]
pub(crate) struct NativeFailure {
    pub(crate) from_major: u32,
    file: String,
    error: String,
    note: String,
}

/// Which files of the directory are forward migrations.
#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Layout {
    /// Every `*.sql` file but `*.down.sql`.
    Sql,
    /// `<version>_<name>/up.sql` folders (diesel).
    Diesel,
}

/// How the runner wraps the files in transactions.
#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Transaction {
    /// One transaction per file.
    Each,
    /// One transaction for all of them.
    Whole,
}

/// A stop the manifest records.
#[derive(Deserialize)]
pub(crate) struct Expected {
    file: String,
    kind: String,
    cause: String,
    note: String,
}

/// A stop pgshift made: the file (its name, empty for the whole directory), what
/// happened (`refused`, `failed`, `error`, `not-read`, `left-behind`) and its cause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stop {
    file: String,
    kind: String,
    cause: String,
}

pub(crate) fn manifest() -> &'static Manifest {
    static MANIFEST_READ: OnceLock<Manifest> = OnceLock::new();
    MANIFEST_READ.get_or_init(|| {
        let text = fs::read_to_string(workspace_root().join(MANIFEST)).expect("manifest readable");
        serde_json::from_str(&text).expect("manifest parses")
    })
}

pub(crate) fn entry(name: &str) -> &'static Entry {
    manifest()
        .directories
        .iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("{name} is not in {MANIFEST}"))
}

/// The fetched directories by name, from `scripts/corpora` (cached downloads).
pub(crate) fn corpora() -> &'static BTreeMap<String, PathBuf> {
    static FETCHED: OnceLock<BTreeMap<String, PathBuf>> = OnceLock::new();
    FETCHED.get_or_init(|| {
        let output = Command::new("python3")
            .arg(workspace_root().join("scripts/corpora"))
            .current_dir(workspace_root())
            .output()
            .expect("python3 runs scripts/corpora");
        assert!(
            output.status.success(),
            "scripts/corpora could not fetch the directories (run it by hand to see why):\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| line.split_once('\t'))
            .map(|(name, path)| (name.to_owned(), PathBuf::from(path)))
            .collect()
    })
}

pub(crate) fn cluster() -> &'static Cluster {
    shared_cluster().expect("a PostgreSQL cluster starts")
}

/// A scratch directory of this process for `name`, empty.
pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pgshift-realdirs-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// Copies `from` into `to` with the same names, each `.sql` file's text with the
/// runner's substitutions applied.
pub(crate) fn copy_tree(from: &Path, to: &Path, substitute: &[(String, String)]) {
    fs::create_dir_all(to).expect("copy directory");
    for item in fs::read_dir(from).expect("directory readable") {
        let item = item.expect("directory entry");
        let target = to.join(item.file_name());
        if item.file_type().expect("file type").is_dir() {
            copy_tree(&item.path(), &target, substitute);
        } else if item.path().extension().is_some_and(|e| e == "sql") {
            let mut text = fs::read_to_string(item.path()).expect("SQL file readable");
            for (from, to) in substitute {
                text = text.replace(from, to);
            }
            fs::write(&target, text).expect("copy written");
        } else {
            fs::copy(item.path(), &target).expect("file copied");
        }
    }
}

/// The forward migrations of `entry`'s directory `dir` in the runner's order (the
/// byte order of their names, which the manifest says is the runner's order): for
/// `sql`, every `.sql` file but `.down.sql` ones, and only those ending in `only`
/// where the runner picks one dialect's files.
pub(crate) fn forward_files(entry: &Entry, dir: &Path) -> Vec<PathBuf> {
    let only = entry.only.as_deref().unwrap_or(".sql");
    let layout = entry.layout;
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .expect("directory readable")
        .filter_map(|item| item.ok())
        .filter_map(|item| {
            let name = item.file_name().to_string_lossy().into_owned();
            match layout {
                Layout::Sql => {
                    (name.ends_with(only) && !name.ends_with(".down.sql")).then(|| item.path())
                }
                Layout::Diesel => {
                    let up = item.path().join("up.sql");
                    up.is_file().then_some(up)
                }
            }
        })
        .collect();
    files.sort();
    files
}

/// The name a stop gives a file: its file name, or its folder's for diesel.
pub(crate) fn display_name(path: &Path, layout: Layout) -> String {
    let named = match layout {
        Layout::Sql => path,
        Layout::Diesel => path.parent().unwrap_or(path),
    };
    named
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Where the versions are integers, their order is the order of the names (so the
/// name order the harness runs is the runner's version order).
pub(crate) fn assert_name_order_is_version_order(entry: &Entry, files: &[PathBuf]) {
    assert_eq!(
        entry.order, "name",
        "{}: the harness knows the name order",
        entry.name
    );
    let versions: Vec<Option<u128>> = files
        .iter()
        .map(|f| {
            let name = display_name(f, entry.layout);
            let digits: String = name.chars().take_while(char::is_ascii_digit).collect();
            let whole = !digits.is_empty() && name[digits.len()..].starts_with(['_', '.']);
            whole.then(|| digits.parse().ok()).flatten()
        })
        .collect();
    if versions.iter().all(Option::is_some) && entry.layout == Layout::Sql {
        let mut sorted = versions.clone();
        sorted.sort();
        assert_eq!(
            versions, sorted,
            "{}: name order is version order",
            entry.name
        );
    }
}

/// `psql -X -q -v ON_ERROR_STOP=1` on `db` with `args`; its standard error on failure.
pub(crate) fn psql(db: &str, args: &[&std::ffi::OsStr]) -> Result<(), String> {
    let output = cluster()
        .command("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d"])
        .arg(cluster().connection_string(db))
        .args(args)
        .output()
        .map_err(|e| format!("psql: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

/// Runs `files` on `db` as the runner wraps them: each in its own transaction, or all
/// in one; the prelude at the start of each transaction. A file whose first line is
/// sqlx's `-- no-transaction` runs without one.
pub(crate) fn run_natively(
    entry: &Entry,
    db: &str,
    prelude: &Path,
    files: &[PathBuf],
) -> Result<(), String> {
    let with_prelude = |files: &[&Path]| {
        let mut args: Vec<&std::ffi::OsStr> = vec!["-1".as_ref()];
        if !entry.prelude.is_empty() {
            args.extend(["-f".as_ref(), prelude.as_os_str()]);
        }
        for file in files {
            args.extend(["-f".as_ref(), file.as_os_str()]);
        }
        psql(db, &args)
    };
    match entry.transaction {
        Transaction::Whole => {
            let all: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
            with_prelude(&all)
        }
        Transaction::Each => {
            for file in files {
                let text = fs::read_to_string(file).map_err(|e| e.to_string())?;
                let outside = text
                    .lines()
                    .next()
                    .is_some_and(|l| l.trim() == "-- no-transaction");
                if outside {
                    psql(db, &["-f".as_ref(), file.as_os_str()])?;
                } else {
                    with_prelude(&[file.as_path()])
                        .map_err(|e| format!("{}: {e}", file.display()))?;
                }
            }
            Ok(())
        }
    }
}

/// `pg_dump --schema-only` of `db` without pgshift's schema and the history tables,
/// and without the `\restrict` key lines.
pub(crate) fn dump(db: &str, history: &[String]) -> String {
    let mut cmd = cluster().command("pg_dump");
    cmd.args(["--schema-only", "--exclude-schema=pgshift", "-d"])
        .arg(cluster().connection_string(db));
    for table in history {
        cmd.arg(format!("--exclude-table={table}"));
    }
    let output = cmd.output().expect("pg_dump runs");
    assert!(
        output.status.success(),
        "pg_dump {db}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| !l.starts_with("\\restrict ") && !l.starts_with("\\unrestrict "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `diff -u` of two dumps, for a failure message.
pub(crate) fn unified_diff(work: &Path, native: &str, migrated: &str) -> String {
    let (a, b) = (work.join("native.sql"), work.join("migrated.sql"));
    fs::write(&a, native).expect("dump written");
    fs::write(&b, migrated).expect("dump written");
    let output = Command::new("diff")
        .arg("-u")
        .args([&a, &b])
        .output()
        .expect("diff runs");
    let text = String::from_utf8_lossy(&output.stdout);
    text.chars().take(12_000).collect()
}

/// The SQLSTATE at the end of a message (`… (2BP01)`), else the message.
pub(crate) fn sqlstate(message: &str) -> String {
    message
        .trim_end()
        .strip_suffix(')')
        .and_then(|m| m.rsplit_once('('))
        .map(|(_, code)| code.to_owned())
        .filter(|code| code.len() == 5)
        .unwrap_or_else(|| message.to_owned())
}

/// Objects copy-and-swap runs of a verdict's units left behind: `(reason, DROP …)`.
pub(crate) fn left_behind(verdict: &Value) -> Vec<(String, String)> {
    verdict["units"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|unit| {
            unit["copy_and_swap"]["report"]["left_behind"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|item| {
            (
                item["reason"].as_str().unwrap_or("").to_owned(),
                item["statement"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// Why a verdict that did not finish stopped: the first refusal's cause, or the
/// failed unit's error.
pub(crate) fn cause(verdict: &Value, error: &Value) -> String {
    if let Some(cause) = verdict["refusals"][0]["refusal"]["cause"].as_str() {
        return cause.to_owned();
    }
    if let Some(cause) = verdict["runtime_refusal"]["cause"].as_str() {
        return cause.to_owned();
    }
    let failure = verdict["units"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|u| u["report"]["failure"].as_str());
    match failure {
        Some(text) => sqlstate(text),
        None => error.to_string(),
    }
}

/// What B's run did: its stops, whether every file ran (so the schemas compare), and
/// the `DROP` statements of what copy-and-swap left behind.
pub(crate) struct Outcome {
    stops: Vec<Stop>,
    complete: bool,
    drops: Vec<String>,
    log: Vec<String>,
}

/// `pgshift <args> --url <db> --format json`: exit code and document.
pub(crate) fn pgshift_json(db: &str, args: &[&str]) -> (i32, Value) {
    let url = cluster().connection_string(db);
    let mut all = args.to_vec();
    all.extend(["--url", &url, "--format", "json"]);
    let run = pgshift(&all);
    let json = serde_json::from_str(&run.stdout).unwrap_or_else(|err| {
        panic!(
            "pgshift {args:?}: one JSON document ({err}):\n{}\n{}",
            run.stdout, run.stderr
        )
    });
    (run.code, json)
}

/// B through `pgshift migrate`, continuing past each stop with the file run natively
/// and `--baseline`d; through `pgshift apply` file by file when `migrate` reads none.
pub(crate) fn run_pgshift(
    entry: &Entry,
    db: &str,
    dir: &Path,
    prelude: &Path,
    files: &[PathBuf],
) -> Outcome {
    let mut out = Outcome {
        stops: Vec::new(),
        complete: false,
        drops: Vec::new(),
        log: Vec::new(),
    };
    let dir_text = dir.to_string_lossy().into_owned();
    for _round in 0..=files.len() {
        let (code, json) = pgshift_json(db, &["migrate", &dir_text]);
        out.log.push(format!("migrate: exit {code}"));
        if json["kind"] == "error" {
            out.stops.push(Stop {
                file: String::new(),
                kind: "error".to_owned(),
                cause: json["code"].as_str().unwrap_or("").to_owned(),
            });
            out.log.push(format!("  {}", json["message"]));
            return apply_each(entry, db, prelude, files, out);
        }
        let reports = json["verdict"]["files"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for report in &reports {
            let name = display_name(
                Path::new(report["path"].as_str().unwrap_or("")),
                entry.layout,
            );
            for (reason, drop) in left_behind(&report["verdict"]) {
                out.stops.push(Stop {
                    file: name.clone(),
                    kind: "left-behind".to_owned(),
                    cause: sqlstate(&reason),
                });
                out.drops.push(drop);
            }
        }
        let ran = ["applied", "applied-blocking", "already-applied"];
        let Some(stop) = reports
            .iter()
            .find(|f| !ran.iter().any(|s| f["status"] == *s))
        else {
            if reports.len() < files.len() {
                out.stops.push(Stop {
                    file: String::new(),
                    kind: "not-read".to_owned(),
                    cause: format!("{} of {}", reports.len(), files.len()),
                });
                assert!(
                    reports.is_empty(),
                    "{}: migrate read some files: {json:#}",
                    entry.name
                );
                return apply_each(entry, db, prelude, files, out);
            }
            out.complete = code == 0;
            return out;
        };
        let path = PathBuf::from(stop["path"].as_str().unwrap_or(""));
        let name = display_name(&path, entry.layout);
        let verdict = &stop["verdict"];
        out.stops.push(Stop {
            file: name.clone(),
            kind: stop["status"].as_str().unwrap_or("").to_owned(),
            cause: cause(verdict, &stop["error"]),
        });
        out.log.push(format!("  {name}: {}", verdict["refusals"]));
        if verdict["committed_units"].as_u64().unwrap_or(0) > 0 {
            out.log.push(format!(
                "  {name}: part of the file committed; cannot go on"
            ));
            return out;
        }
        if let Err(err) = run_natively(entry, db, prelude, &[path]) {
            out.log.push(format!("  {name} natively on B: {err}"));
            return out;
        }
        // The version's text (`format_version` 1 writes it as a string).
        let version = match &stop["version"] {
            serde_json::Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        let (code, json) = pgshift_json(db, &["migrate", "--baseline", &version, &dir_text]);
        assert_eq!(code, 0, "{}: baseline {version}: {json:#}", entry.name);
    }
    out
}

/// B through `pgshift apply`, each file in the runner's order; a refused file runs
/// natively, then the next.
pub(crate) fn apply_each(
    entry: &Entry,
    db: &str,
    prelude: &Path,
    files: &[PathBuf],
    mut out: Outcome,
) -> Outcome {
    for file in files {
        let name = display_name(file, entry.layout);
        let (code, json) = pgshift_json(db, &["apply", &file.to_string_lossy()]);
        let verdict = &json["verdict"];
        for (reason, drop) in left_behind(verdict) {
            out.stops.push(Stop {
                file: name.clone(),
                kind: "left-behind".to_owned(),
                cause: sqlstate(&reason),
            });
            out.drops.push(drop);
        }
        if code == 0 || code == 3 {
            continue;
        }
        out.stops.push(Stop {
            file: name.clone(),
            kind: if code == 2 { "refused" } else { "failed" }.to_owned(),
            cause: cause(verdict, &json["message"]),
        });
        if verdict["committed_units"].as_u64().unwrap_or(0) > 0 {
            out.log
                .push(format!("  apply {name}: part of the file committed"));
            return out;
        }
        if let Err(err) = run_natively(entry, db, prelude, std::slice::from_ref(file)) {
            out.log.push(format!("  {name} natively on B: {err}"));
            return out;
        }
    }
    out.complete = true;
    out
}

/// A directory made ready to run: a scratch directory holding its copy (the
/// runner's substitutions applied) and the runner's prelude, and its forward files.
pub(crate) struct Prepared {
    pub(crate) work: PathBuf,
    pub(crate) copy: PathBuf,
    pub(crate) prelude: PathBuf,
    pub(crate) files: Vec<PathBuf>,
}

/// Copies the fetched directory of `entry` into a scratch directory named `label`.
pub(crate) fn prepare(entry: &Entry, label: &str) -> Prepared {
    let fetched = corpora()
        .get(&entry.name)
        .unwrap_or_else(|| panic!("scripts/corpora printed no directory for {}", entry.name));
    let work = scratch(label);
    let copy = work.join(fetched.file_name().expect("directory name"));
    copy_tree(fetched, &copy, &entry.substitute);
    let files = forward_files(entry, &copy);
    let prelude = work.join("prelude.sql");
    fs::write(&prelude, &entry.prelude).expect("prelude written");
    Prepared {
        work,
        copy,
        prelude,
        files,
    }
}

/// Two fresh databases (`<prefix>_<first>`, `<prefix>_<second>`), each with the
/// runner's setup run.
pub(crate) fn twin_databases(entry: &Entry, first: &str, second: &str) -> (String, String) {
    let mut made = [first, second].map(|suffix| {
        let db = cluster()
            .fresh_database(&format!("{}_{suffix}", entry.name))
            .expect("database");
        if !entry.setup.is_empty() {
            cluster()
                .psql(&db, &entry.setup)
                .expect("the runner's setup runs");
        }
        db
    });
    (std::mem::take(&mut made[0]), std::mem::take(&mut made[1]))
}

/// The whole check of one directory of the manifest.
pub(crate) fn check(name: &str) {
    let entry = entry(name);
    let Prepared {
        work,
        copy,
        prelude,
        files,
    } = prepare(entry, name);
    assert_eq!(files.len(), entry.files, "{name}: forward files {files:?}");
    assert_name_order_is_version_order(entry, &files);
    let (native, migrated) = twin_databases(entry, "native", "pgshift");
    let native_run = run_natively(entry, &native, &prelude, &files);
    let major = cluster().version().major;
    if let Some(fails) = entry
        .native_fails
        .as_ref()
        .filter(|f| major >= f.from_major)
    {
        // The directory runs under no runner on this server: check that this is still so.
        let err = native_run.expect_err("the recorded native failure is gone: update the manifest");
        assert!(
            err.contains(&fails.file) && err.contains(&fails.error),
            "{name} on {major}: the native run fails otherwise than recorded ({}): {err}",
            fails.note
        );
        let _ = fs::remove_dir_all(&work);
        return;
    }
    native_run.unwrap_or_else(|err| {
        panic!("{name}: the native run fails, so the manifest is wrong: {err}")
    });

    let outcome = run_pgshift(entry, &migrated, &copy, &prelude, &files);
    let expected: Vec<&Expected> = entry.expect.iter().collect();
    finish(entry, &expected, &outcome, &native, &migrated, &work);
    let _ = fs::remove_dir_all(&work);
}

/// Checks what pgshift's run did against the `expected` stops, runs the documented
/// `DROP`s of what it left behind, and compares the schemas.
fn finish(
    entry: &Entry,
    expected: &[&Expected],
    outcome: &Outcome,
    native: &str,
    migrated: &str,
    work: &Path,
) {
    let name = &entry.name;
    let notes: Vec<&str> = expected.iter().map(|e| e.note.as_str()).collect();
    let expected: Vec<Stop> = expected
        .iter()
        .map(|e| Stop {
            file: e.file.clone(),
            kind: e.kind.clone(),
            cause: e.cause.clone(),
        })
        .collect();
    assert_eq!(
        outcome.stops,
        expected,
        "{name}: pgshift's stops are not the ones {MANIFEST} records ({notes:?}). A recorded \
         stop that is gone was fixed: remove it there and from README's limitations; a new \
         one is a regression or a new finding.\n{}",
        outcome.log.join("\n")
    );
    assert!(
        outcome.complete,
        "{name}: the run could not go on after its last stop:\n{}",
        outcome.log.join("\n")
    );
    for drop in &outcome.drops {
        cluster()
            .psql(migrated, drop)
            .unwrap_or_else(|err| panic!("{name}: the documented `{drop}` fails: {err}"));
    }
    let (a, b) = (dump(native, &entry.history), dump(migrated, &entry.history));
    assert!(
        a == b,
        "{name}: the schema pgshift left differs from the native run's:\n{}",
        unified_diff(work, &a, &b)
    );
}

/// The version of a file as its name starts (`20210425153745_…` → `20210425153745`);
/// a dotted release keeps its numeric steps, as procrastinate's runner chains them
/// (`00.05.00_01_drop_x` → `00.05.00_01`).
fn leading_version(path: &Path, layout: Layout) -> String {
    let name = display_name(path, layout);
    let digits: String = name.chars().take_while(char::is_ascii_digit).collect();
    if !name[digits.len()..].starts_with('.') {
        return digits;
    }
    name.trim_end_matches(".sql")
        .split('_')
        .take_while(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_digit() || c == '.'))
        .collect::<Vec<_>>()
        .join("_")
}

/// Records `files` in `public._sqlx_migrations` as sqlx does: its table, and per file
/// the version, the description (the name's words), success and the SHA-384 of the
/// file's bytes.
fn record_as_sqlx(db: &str, entry: &Entry, files: &[PathBuf], work: &Path) {
    cluster()
        .psql(
            db,
            "CREATE TABLE IF NOT EXISTS public._sqlx_migrations (version bigint PRIMARY KEY, \
             description text NOT NULL, installed_on timestamptz NOT NULL DEFAULT now(), \
             success boolean NOT NULL, checksum bytea NOT NULL, execution_time bigint NOT NULL)",
        )
        .expect("sqlx's history table");
    let insert = work.join("sqlx-insert.sql");
    fs::write(
        &insert,
        "INSERT INTO public._sqlx_migrations \
           (version, description, success, checksum, execution_time) \
         VALUES (:'version'::bigint, :'description', true, \
                 sha384(convert_to(:'content', 'UTF8')), 0);\n",
    )
    .expect("insert written");
    for file in files {
        let name = display_name(file, entry.layout);
        let version = leading_version(file, entry.layout);
        let description = name[version.len()..]
            .trim_start_matches('_')
            .trim_end_matches(".sql")
            .trim_end_matches(".up")
            .replace('_', " ");
        let content = fs::read_to_string(file).expect("file readable");
        let vars = [
            format!("version={version}"),
            format!("description={description}"),
            format!("content={content}"),
        ];
        let mut args: Vec<&std::ffi::OsStr> = Vec::new();
        for var in &vars {
            args.extend([std::ffi::OsStr::new("-v"), std::ffi::OsStr::new(var)]);
        }
        args.extend(["-f".as_ref(), insert.as_os_str()]);
        psql(db, &args).unwrap_or_else(|err| panic!("{name} recorded as sqlx's: {err}"));
    }
}

/// A database the directory's runner migrated halfway (its first half natively, and
/// for sqlx its history as sqlx writes it), adopted with `--baseline` and migrated
/// on: the stops of the second half are the manifest's, and the schema is a native
/// run's. For sqlx's history, `migrate --dry-run` before the baseline is refused once
/// (exit 2, `another-runners-history`), naming sqlx, how many versions it recorded and
/// `--baseline sqlx` (F12, fixed).
pub(crate) fn check_halfway(name: &str) {
    let entry = entry(name);
    assert!(
        entry
            .expect
            .iter()
            .all(|e| e.kind != "error" && e.kind != "not-read"),
        "{name}: migrate does not read this directory"
    );
    let Prepared {
        work,
        copy,
        prelude,
        files,
    } = prepare(entry, &format!("{name}-halfway"));
    let major = cluster().version().major;
    if entry
        .native_fails
        .as_ref()
        .is_some_and(|f| major >= f.from_major)
    {
        // No runner runs this directory here (checked by the whole-directory test).
        let _ = fs::remove_dir_all(&work);
        return;
    }
    let half = files.len() / 2;
    let (native, migrated) = twin_databases(entry, "whole", "halfway");
    run_natively(entry, &native, &prelude, &files).expect("the native run");
    run_natively(entry, &migrated, &prelude, &files[..half]).expect("the first half");
    let dir = copy.to_string_lossy().into_owned();
    let baseline = if entry.history_import.as_deref() == Some("sqlx") {
        record_as_sqlx(&migrated, entry, &files[..half], &work);
        // F12, fixed: the dry run recognises sqlx's history and refuses once, naming
        // the command that adopts it, instead of planning the applied files again.
        let (code, json) = pgshift_json(&migrated, &["migrate", "--dry-run", &dir]);
        let message = json["message"].as_str().unwrap_or("");
        assert!(
            code == 2
                && json["code"] == "another-runners-history"
                && message.contains("migrated by sqlx")
                && message.contains(&format!("{} applied version", files[..half].len()))
                && message.contains("--baseline sqlx"),
            "{name}: a dry run of a database sqlx migrated halfway is refused once, naming \
             sqlx and --baseline sqlx (exit {code}): {json:#}"
        );
        "sqlx".to_owned()
    } else {
        leading_version(&files[half - 1], entry.layout)
    };
    let (code, json) = pgshift_json(&migrated, &["migrate", "--baseline", &baseline, &dir]);
    assert_eq!(code, 0, "{name}: --baseline {baseline}: {json:#}");
    let outcome = run_pgshift(entry, &migrated, &copy, &prelude, &files);
    let boundary = display_name(&files[half - 1], entry.layout);
    let expected: Vec<&Expected> = entry.expect.iter().filter(|e| e.file > boundary).collect();
    finish(entry, &expected, &outcome, &native, &migrated, &work);
    let _ = fs::remove_dir_all(&work);
}
