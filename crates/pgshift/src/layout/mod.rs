//! The layouts of migrations directories that real projects use, detected from the
//! entries' names (and, for dbmate and goose, their section markers), with one reading
//! of each for `lint`, `plan` and `migrate`:
//!
//! - integer versions of any width, compared as numbers ([`version`]): pgshift's own
//!   `0007_add_index.sql` (a sequence: gaps are suspicious), sqlx's
//!   `20240101120000_add_index.sql`, pop's, golang-migrate's, dbmate's and goose's (versions,
//!   not a sequence: gaps are expected);
//! - reversible pairs (sqlx, golang-migrate, pop): `…_name.up.sql` is the forward
//!   migration, `…_name.down.sql` its reversal, never read as a forward migration;
//!   pop's dialect suffix (`…_name.postgres.up.sql`) picks the PostgreSQL file, files of
//!   other dialects are not read, and pop's own `.fizz` files are an error naming them;
//! - diesel: folders `<version>_<name>/` holding `up.sql` (and `down.sql`, never read),
//!   with `metadata.toml` saying `run_in_transaction = false` when the file runs
//!   outside a transaction ([`diesel`]);
//! - Flyway and refinery: `V1__name.sql`, `V1.1__name.sql`; Flyway's undo files
//!   (`U1__name.sql`, next to their `V1__`) are never forward migrations; repeatable
//!   files (`R__name.sql`) come after the versioned ones, by name;
//! - dotted releases with steps: `00.05.00_01_name.sql` (procrastinate), ordered by
//!   the release's numbers and then the step;
//! - dbmate and goose: one file per version holding an up and a down section
//!   ([`body`]); only the up section is read.
//!
//! A directory that mixes layouts (numbered files with Flyway names or diesel folders,
//! reversible pairs with plain files, dbmate sections with goose sections) is an error
//! that says what was found: its order would be a guess.

pub mod body;
pub mod diesel;
pub mod version;

use std::path::{Path, PathBuf};

use serde::Serialize;
use thiserror::Error;

pub use body::{forward_sql, FileForm, ForwardError, ForwardSql, TransactionRule};
pub use version::Version;

/// The layout of a directory's versioned files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LayoutKind {
    /// `NNNN_name.sql`: integer versions that count (every one below 1,000,000): a
    /// sequence, where a gap may be a missing file.
    Numbered,
    /// Integer versions of which some are larger (timestamps such as sqlx's
    /// `YYYYMMDDHHMMSS`, or other wide numbers): versions, not a sequence.
    Timestamp,
    /// `V<version>__name.sql` (Flyway, refinery), with `R__name.sql` repeatables.
    Flyway,
    /// diesel's `<version>_<name>/up.sql` folders.
    Diesel,
    /// `00.05.00_01_name.sql`: a dotted release version and a step after it
    /// (procrastinate's), compared part by part as numbers.
    Dotted,
    /// No file carries a version.
    Unversioned,
}

/// Integer versions at or above this are not read as a counter.
const SEQUENCE_LIMIT: u128 = 1_000_000;

/// A forward migration file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VersionedFile {
    /// Its version.
    pub version: Version,
    /// Its name without version, direction, dialect and `.sql` (`add_index`); for
    /// diesel, the folder's name after the version.
    pub name: String,
    /// Its path (for diesel, the folder's `up.sql`).
    pub path: PathBuf,
    /// How its runner decides whether it runs in one transaction.
    pub transaction: TransactionRule,
}

/// A Flyway repeatable migration (`R__name.sql`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RepeatableFile {
    /// Its name (`views` for `R__views.sql`).
    pub name: String,
    /// Its path.
    pub path: PathBuf,
}

/// Why a file of the directory is not a forward migration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkipReason {
    /// The `.down.sql` half of a reversible pair (or diesel's `down.sql`).
    Down,
    /// A Flyway undo file (`U<version>__`).
    Undo,
    /// A pop file for another database (`….mysql.up.sql`), or the file without a
    /// dialect where a `.postgres.` one of the same version exists.
    OtherDialect,
}

/// A file that is read by no command as a forward migration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SkippedFile {
    /// Its path.
    pub path: PathBuf,
    /// Why.
    pub reason: SkipReason,
}

/// A directory's layout and its files in migration order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Layout {
    /// The layout.
    pub kind: LayoutKind,
    /// Whether the files are reversible pairs (`.up.sql` / `.down.sql`).
    pub reversible: bool,
    /// Where a file's forward SQL is: the whole file, or its up section.
    pub form: FileForm,
    /// Whether file names carry pop's dialect suffix (`.postgres.up.sql`).
    pub dialects: bool,
    /// The forward migrations, in version order (then by name).
    pub files: Vec<VersionedFile>,
    /// Flyway repeatable migrations, by name: they run after the versioned ones.
    pub repeatables: Vec<RepeatableFile>,
    /// `.sql` files that carry no version, by name.
    pub unversioned: Vec<PathBuf>,
    /// Files that are not forward migrations (down, undo and other-dialect files).
    pub skipped: Vec<SkippedFile>,
    /// Entries of the directory that no layout reads (other files, folders without
    /// `up.sql`), by name: said when nothing else is there.
    pub ignored: Vec<String>,
}

impl Layout {
    /// One line for people: `sqlx (timestamp versions, reversible pairs)`.
    pub fn describe(&self) -> String {
        let mut traits: Vec<String> = Vec::new();
        let base = match self.kind {
            LayoutKind::Numbered => {
                traits.push("NNNN_name.sql".to_owned());
                "numbered"
            }
            LayoutKind::Timestamp => {
                let all_times = self.files.iter().all(|f| is_timestamp(&f.version.text));
                traits.push(if all_times {
                    "timestamp versions".to_owned()
                } else {
                    "integer versions".to_owned()
                });
                "sqlx"
            }
            LayoutKind::Flyway => {
                traits.push("V<version>__name.sql".to_owned());
                "flyway"
            }
            LayoutKind::Diesel => {
                traits.push("<version>_<name>/up.sql folders".to_owned());
                "diesel"
            }
            LayoutKind::Dotted => {
                traits.push("NN.NN.NN_NN_name.sql".to_owned());
                "dotted"
            }
            LayoutKind::Unversioned => "unversioned",
        };
        let base = match self.form {
            FileForm::Dbmate => {
                traits.push("-- migrate:up sections".to_owned());
                "dbmate"
            }
            FileForm::Goose => {
                traits.push("-- +goose Up sections".to_owned());
                "goose"
            }
            FileForm::Plain if self.dialects => {
                traits.push("dialect suffixes".to_owned());
                "pop"
            }
            FileForm::Plain => base,
        };
        if self.reversible {
            traits.push("reversible pairs".to_owned());
        }
        let counted = [
            (SkipReason::Down, "down file", "down files"),
            (SkipReason::Undo, "undo file", "undo files"),
            (
                SkipReason::OtherDialect,
                "file of another dialect",
                "files of other dialects",
            ),
        ];
        for (reason, one, many) in counted {
            let n = self.count_skipped(reason);
            if n > 0 {
                traits.push(format!("{n} {} not read", if n == 1 { one } else { many }));
            }
        }
        if !self.repeatables.is_empty() {
            let n = self.repeatables.len();
            traits.push(format!("{n} repeatable{} (R__) after them", plural(n)));
        }
        if !self.unversioned.is_empty() && self.kind != LayoutKind::Unversioned {
            let n = self.unversioned.len();
            traits.push(format!("{n} unversioned file{} last", plural(n)));
        }
        if traits.is_empty() {
            base.to_owned()
        } else {
            format!("{base} ({})", traits.join(", "))
        }
    }

    /// Whether gaps between versions are suspicious (sequential numbers only).
    pub fn expects_sequence(&self) -> bool {
        self.kind == LayoutKind::Numbered
    }

    /// Every forward file: versioned ones first, then the repeatables, then the
    /// unversioned, by name.
    pub fn forward_paths(&self) -> Vec<PathBuf> {
        self.files
            .iter()
            .map(|f| f.path.clone())
            .chain(self.repeatables.iter().map(|r| r.path.clone()))
            .chain(self.unversioned.iter().cloned())
            .collect()
    }

    fn count_skipped(&self, reason: SkipReason) -> usize {
        self.skipped.iter().filter(|s| s.reason == reason).count()
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// A layout as reports carry it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LayoutReport {
    /// The layout.
    pub kind: LayoutKind,
    /// Whether the files are reversible pairs.
    pub reversible: bool,
    /// Where a file's forward SQL is.
    pub form: FileForm,
    /// The one-line description (`sqlx (timestamp versions, reversible pairs)`).
    pub description: String,
    /// Files not read as forward migrations (down, undo and other-dialect files).
    pub skipped: Vec<SkippedFile>,
}

impl LayoutReport {
    /// The report of a detected layout.
    pub fn of(layout: &Layout) -> Self {
        LayoutReport {
            kind: layout.kind,
            reversible: layout.reversible,
            form: layout.form,
            description: layout.describe(),
            skipped: layout.skipped.clone(),
        }
    }
}

/// The layout of one directory a command was given.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InputLayout {
    /// The directory as given.
    pub path: String,
    /// Its layout.
    #[serde(flatten)]
    pub layout: LayoutReport,
}

impl InputLayout {
    /// The layouts of the directories among `inputs`.
    pub fn of_inputs(inputs: &[String]) -> Vec<InputLayout> {
        crate::source::input_layouts(inputs)
            .into_iter()
            .map(|(path, layout)| InputLayout {
                path,
                layout: LayoutReport::of(&layout),
            })
            .collect()
    }
}

/// Why a directory's layout cannot be read unambiguously.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// Files of two layouts in one directory.
    #[error("{dir}: mixed migration layouts: {first} and {second}; pgshift cannot tell which order they run in. Use one layout per directory")]
    Mixed {
        /// The directory.
        dir: String,
        /// One layout and an example file.
        first: String,
        /// The other and an example file.
        second: String,
    },
    /// A `.down.sql` file without its `.up.sql`.
    #[error("{file}: a down migration without its up migration; it is never read as a forward migration, so the forward half is missing")]
    OrphanDown {
        /// The file.
        file: String,
    },
    /// A `U` file with no `V` file of its version.
    #[error("{file}: a U file with no V file of its version: Flyway reads it as an undo migration, refinery as an unversioned forward one. Rename it (V… for a forward migration)")]
    AmbiguousUndo {
        /// The file.
        file: String,
    },
    /// pop's own migration language.
    #[error("{}: pop's fizz migrations (its own DSL, which pop translates to SQL); pgshift reads SQL only. Generate the SQL (`soda generate sql`) or write .sql migrations", files.join(", "))]
    Fizz {
        /// The `.fizz` files.
        files: Vec<String>,
    },
    /// A diesel folder without its `up.sql`.
    #[error("{folder}: a diesel migration folder without up.sql; diesel refuses it too")]
    DieselWithoutUp {
        /// The folder.
        folder: String,
    },
    /// A diesel `metadata.toml` that does not read.
    #[error("{file}: {reason}")]
    DieselMetadata {
        /// The file.
        file: String,
        /// What is wrong.
        reason: String,
    },
}

/// How one file name reads.
#[derive(Debug)]
enum NameKind {
    Numbered {
        version: Version,
        name: String,
        direction: Option<Direction>,
        dialect: Option<String>,
    },
    FlywayVersioned {
        version: Version,
        name: String,
    },
    FlywayUndo {
        version: Version,
    },
    Repeatable {
        name: String,
    },
    Unversioned,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Up,
    Down,
}

/// pop's dialect suffixes; only the PostgreSQL ones are read.
const POP_DIALECTS: &[&str] = &[
    "postgres",
    "postgresql",
    "pg",
    "cockroach",
    "crdb",
    "cockroachdb",
    "mysql",
    "mariadb",
    "sqlite",
    "sqlite3",
];
const POP_POSTGRES: &[&str] = &["postgres", "postgresql", "pg"];

fn read_name(file_name: &str) -> NameKind {
    let Some(stem) = file_name.strip_suffix(".sql") else {
        return NameKind::Unversioned;
    };
    if let Some(name) = stem.strip_prefix("R__") {
        return NameKind::Repeatable {
            name: name.to_owned(),
        };
    }
    if let Some((prefix, rest)) = flyway_prefix(stem) {
        if let Some((version_text, name)) = rest.split_once("__") {
            if let Some(version) = Version::dotted(version_text) {
                return match prefix {
                    'V' => NameKind::FlywayVersioned {
                        version,
                        name: name.to_owned(),
                    },
                    _ => NameKind::FlywayUndo { version },
                };
            }
        }
    }
    let digits = dotted_prefix(stem)
        .unwrap_or_else(|| stem.chars().take_while(char::is_ascii_digit).collect());
    let Some(version) = Version::dotted(&digits).filter(|_| !digits.is_empty()) else {
        return NameKind::Unversioned;
    };
    let rest = &stem[digits.len()..];
    let (rest, direction) = if let Some(r) = rest.strip_suffix(".up") {
        (r, Some(Direction::Up))
    } else if let Some(r) = rest.strip_suffix(".down") {
        (r, Some(Direction::Down))
    } else {
        (rest, None)
    };
    let (rest, dialect) = match rest.rsplit_once('.') {
        Some((before, dialect)) if POP_DIALECTS.contains(&dialect) => {
            (before, Some(dialect.to_owned()))
        }
        _ => (rest, None),
    };
    if !(rest.is_empty() || rest.starts_with(['_', '-'])) {
        return NameKind::Unversioned;
    }
    NameKind::Numbered {
        version,
        name: rest.trim_start_matches(['_', '-']).to_owned(),
        direction,
        dialect,
    }
}

/// A release version written with dots and the steps after it, as procrastinate names
/// its files (`03.00.00_50_post_x` → `03.00.00_50`): numbers joined by `.` (at least
/// one dot), then each `_<digits>` that is followed by `_` or the end. A name whose
/// first number is followed by `_` is an integer version (`0001_2fa` → `0001`).
fn dotted_prefix(stem: &str) -> Option<String> {
    let numbers = |text: &str| text.chars().take_while(char::is_ascii_digit).count();
    let mut end = numbers(stem);
    if end == 0 || !stem[end..].starts_with('.') {
        return None;
    }
    while stem[end..].starts_with('.') {
        let n = numbers(&stem[end + 1..]);
        if n == 0 {
            return None;
        }
        end += 1 + n;
    }
    while stem[end..].starts_with('_') {
        let n = numbers(&stem[end + 1..]);
        let after = &stem[end + 1 + n..];
        if n == 0 || !(after.is_empty() || after.starts_with('_')) {
            break;
        }
        end += 1 + n;
    }
    Some(stem[..end].to_owned())
}

fn flyway_prefix(stem: &str) -> Option<(char, &str)> {
    let mut chars = stem.chars();
    let first = chars.next()?;
    let rest = chars.as_str();
    (matches!(first, 'V' | 'U') && rest.starts_with(|c: char| c.is_ascii_digit()))
        .then_some((first, rest))
}

/// Fourteen digits reading as `YYYYMMDDHHMMSS`.
fn is_timestamp(digits: &str) -> bool {
    if digits.len() != 14 || !digits.chars().all(|c| c.is_ascii_digit()) {
        return false;
    }
    let field = |from: usize, to: usize| digits[from..to].parse::<u32>().unwrap_or(u32::MAX);
    (1970..=9999).contains(&field(0, 4))
        && (1..=12).contains(&field(4, 6))
        && (1..=31).contains(&field(6, 8))
        && field(8, 10) < 24
        && field(10, 12) < 60
        && field(12, 14) < 61
}

/// One entry of a directory, as the layout reads it.
#[derive(Clone, Debug)]
enum Entry {
    /// A `.sql` file, with the form its markers show.
    Sql {
        name: String,
        path: PathBuf,
        form: FileForm,
    },
    /// A diesel migration folder.
    Diesel(diesel::Folder),
    /// A `.fizz` file.
    Fizz(PathBuf),
    /// Anything else (said when nothing is read).
    Other(String),
}

/// How files are read, by the layout of the directory each is in, each directory
/// detected once: a file given by name is read as its directory's layout reads it (a
/// dbmate file's up section, a Flyway file under Flyway's transaction rule).
#[derive(Debug, Default)]
pub struct Readings {
    dirs: std::collections::HashMap<PathBuf, Option<Layout>>,
}

impl Readings {
    /// How `path` is read: its form and its runner's rule; `None` when its directory's
    /// layout does not read it as a forward file, or cannot be read.
    pub fn of(&mut self, path: &Path) -> Option<(FileForm, TransactionRule)> {
        let parent = path.parent()?;
        // A diesel `up.sql` belongs to the layout of its folder's directory.
        let diesel_root = (path.file_name()? == "up.sql")
            .then(|| parent.parent())
            .flatten();
        [Some(parent), diesel_root]
            .into_iter()
            .flatten()
            .find_map(|dir| self.in_dir(dir, path))
    }

    fn in_dir(&mut self, dir: &Path, path: &Path) -> Option<(FileForm, TransactionRule)> {
        let key = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir.to_path_buf()
        };
        let layout = self
            .dirs
            .entry(key.clone())
            .or_insert_with(|| detect(&key).ok().and_then(Result::ok))
            .as_ref()?;
        let wanted = key.join(path.strip_prefix(dir).ok()?);
        if let Some(file) = layout.files.iter().find(|f| f.path == wanted) {
            return Some((layout.form, file.transaction));
        }
        layout
            .repeatables
            .iter()
            .any(|r| r.path == wanted)
            .then_some((layout.form, TransactionRule::Detected))
    }
}

/// Reads the layout of `dir` (an I/O error is the caller's).
pub fn detect(dir: &Path) -> std::io::Result<Result<Layout, LayoutError>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            match diesel::folder(&path, &name)? {
                Some(Ok(folder)) => entries.push(Entry::Diesel(folder)),
                Some(Err(err)) => return Ok(Err(err)),
                None => entries.push(Entry::Other(format!("{name}/"))),
            }
        } else if name.ends_with(".sql") {
            let form = body::form_of(&std::fs::read(&path)?);
            entries.push(Entry::Sql { name, path, form });
        } else if name.ends_with(".fizz") {
            entries.push(Entry::Fizz(path));
        } else {
            entries.push(Entry::Other(name));
        }
    }
    Ok(from_entries(&dir.display().to_string(), entries))
}

/// The families of files seen, each with a first example, to say what a mixed
/// directory holds.
#[derive(Default)]
struct Families(Vec<(&'static str, String)>);

impl Families {
    fn note(&mut self, family: &'static str, file: &str) {
        if !self.0.iter().any(|(f, _)| *f == family) {
            self.0.push((family, file.to_owned()));
        }
    }

    fn find(&self, prefix: &str) -> Option<&(&'static str, String)> {
        self.0.iter().find(|(f, _)| f.starts_with(prefix))
    }
}

/// What the entries of one directory collect into, before the checks.
#[derive(Default)]
struct Collected {
    families: Families,
    files: Vec<VersionedFile>,
    ups: Vec<Version>,
    downs: Vec<(Version, PathBuf)>,
    undos: Vec<(Version, PathBuf)>,
    repeatables: Vec<RepeatableFile>,
    unversioned: Vec<PathBuf>,
    skipped: Vec<SkippedFile>,
    fizz: Vec<String>,
    ignored: Vec<String>,
    forms: Vec<FileForm>,
    dialect_seen: bool,
}

/// The layout of a directory's entries (sorted or not).
fn from_entries(dir: &str, mut entries: Vec<Entry>) -> Result<Layout, LayoutError> {
    entries.sort_by_key(entry_name);
    let mut c = Collected::default();
    for entry in entries {
        match entry {
            Entry::Sql { name, path, form } => c.sql(&name, path, form),
            Entry::Diesel(folder) => c.diesel(folder),
            Entry::Fizz(path) => c.fizz.push(path.display().to_string()),
            Entry::Other(name) => c.ignored.push(name),
        }
    }
    if !c.fizz.is_empty() {
        return Err(LayoutError::Fizz { files: c.fizz });
    }
    check_mixed(dir, &c.families)?;
    c.pick_dialects();
    let mut skipped = pair_reversals(&c.files, &c.ups, c.downs, c.undos)?;
    skipped.extend(c.skipped);
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    let families = &c.families;
    let kind = if families.find("Flyway").is_some() {
        LayoutKind::Flyway
    } else if families.find("diesel").is_some() {
        LayoutKind::Diesel
    } else if families.find("dotted").is_some() {
        LayoutKind::Dotted
    } else if families.find("integer").is_some() {
        let counts = c
            .files
            .iter()
            .all(|f| f.version.as_u128().is_some_and(|v| v < SEQUENCE_LIMIT));
        if counts {
            LayoutKind::Numbered
        } else {
            LayoutKind::Timestamp
        }
    } else {
        LayoutKind::Unversioned
    };
    let form = c.forms.first().copied().unwrap_or(FileForm::Plain);
    let mut files = c.files;
    files.sort_by(|a, b| a.version.cmp(&b.version).then_with(|| a.path.cmp(&b.path)));
    let mut repeatables = c.repeatables;
    repeatables.sort_by(|a, b| a.name.cmp(&b.name));
    let mut unversioned = c.unversioned;
    unversioned.sort();
    Ok(Layout {
        kind,
        reversible: !c.ups.is_empty(),
        form,
        dialects: c.dialect_seen,
        files,
        repeatables,
        unversioned,
        skipped,
        ignored: c.ignored,
    })
}

fn entry_name(entry: &Entry) -> String {
    match entry {
        Entry::Sql { name, .. } => name.clone(),
        Entry::Diesel(folder) => folder.name.clone(),
        Entry::Fizz(path) => path.display().to_string(),
        Entry::Other(name) => name.clone(),
    }
}

impl Collected {
    fn sql(&mut self, file_name: &str, path: PathBuf, form: FileForm) {
        let read = read_name(file_name);
        if !matches!(read, NameKind::Unversioned) {
            match form {
                FileForm::Plain => self.families.note("plain SQL files", file_name),
                FileForm::Dbmate => self
                    .families
                    .note("dbmate sections (-- migrate:up)", file_name),
                FileForm::Goose => self
                    .families
                    .note("goose sections (-- +goose Up)", file_name),
            }
            if !self.forms.contains(&form) {
                self.forms.push(form);
            }
        }
        match read {
            NameKind::Repeatable { name } => {
                self.families.note(
                    "Flyway names (V<version>__name.sql, R__name.sql)",
                    file_name,
                );
                self.repeatables.push(RepeatableFile { name, path });
            }
            NameKind::Unversioned => self.unversioned.push(path),
            NameKind::FlywayVersioned { version, name } => {
                self.families.note(
                    "Flyway names (V<version>__name.sql, R__name.sql)",
                    file_name,
                );
                self.files.push(VersionedFile {
                    version,
                    name,
                    path,
                    transaction: TransactionRule::Detected,
                });
            }
            NameKind::FlywayUndo { version } => {
                self.families.note(
                    "Flyway names (V<version>__name.sql, R__name.sql)",
                    file_name,
                );
                self.undos.push((version, path));
            }
            NameKind::Numbered {
                version,
                name,
                direction,
                dialect,
            } => {
                if version.is_dotted() {
                    self.families
                        .note("dotted versions (NN.NN.NN_NN_name.sql)", file_name);
                } else {
                    self.families
                        .note("integer versions (NNNN_name.sql)", file_name);
                }
                let transaction = match form {
                    FileForm::Plain => TransactionRule::Marker,
                    FileForm::Dbmate | FileForm::Goose => TransactionRule::Sections,
                };
                self.dialect_seen |= dialect.is_some();
                let supported = dialect.as_deref().is_none_or(|d| POP_POSTGRES.contains(&d));
                match direction {
                    Some(Direction::Down) => {
                        self.families
                            .note("reversible pairs (.up.sql/.down.sql)", file_name);
                        if supported {
                            self.downs.push((version, path));
                        } else {
                            self.other_dialect(path);
                        }
                    }
                    Some(Direction::Up) => {
                        self.families
                            .note("reversible pairs (.up.sql/.down.sql)", file_name);
                        if !supported {
                            self.other_dialect(path);
                            return;
                        }
                        self.ups.push(version.clone());
                        self.files.push(VersionedFile {
                            version,
                            name,
                            path,
                            transaction,
                        });
                    }
                    None => {
                        self.families.note("plain files (no .up/.down)", file_name);
                        if !supported {
                            self.other_dialect(path);
                            return;
                        }
                        self.files.push(VersionedFile {
                            version,
                            name,
                            path,
                            transaction,
                        });
                    }
                }
            }
        }
    }

    fn diesel(&mut self, folder: diesel::Folder) {
        self.families
            .note("diesel folders (<version>_<name>/up.sql)", &folder.name);
        if let Some(down) = folder.down {
            self.skipped.push(SkippedFile {
                path: down,
                reason: SkipReason::Down,
            });
        }
        self.files.push(VersionedFile {
            version: folder.version,
            name: folder.migration,
            path: folder.up,
            transaction: TransactionRule::Fixed(folder.mode),
        });
    }

    fn other_dialect(&mut self, path: PathBuf) {
        self.skipped.push(SkippedFile {
            path,
            reason: SkipReason::OtherDialect,
        });
    }

    /// pop runs the file of its dialect where one exists, and the file without a
    /// dialect otherwise: a dialect-less up file next to a `.postgres.` one of the same
    /// version is not read (nor its down file).
    fn pick_dialects(&mut self) {
        if !self.dialect_seen {
            return;
        }
        let specific: Vec<Version> = self
            .files
            .iter()
            .filter(|f| has_postgres_suffix(&f.path))
            .map(|f| f.version.clone())
            .collect();
        let mut kept = Vec::with_capacity(self.files.len());
        for file in std::mem::take(&mut self.files) {
            if !has_postgres_suffix(&file.path) && specific.contains(&file.version) {
                self.skipped.push(SkippedFile {
                    path: file.path,
                    reason: SkipReason::OtherDialect,
                });
            } else {
                kept.push(file);
            }
        }
        self.files = kept;
        let mut downs = Vec::with_capacity(self.downs.len());
        for (version, path) in std::mem::take(&mut self.downs) {
            if !has_postgres_suffix(&path) && specific.contains(&version) {
                self.skipped.push(SkippedFile {
                    path,
                    reason: SkipReason::OtherDialect,
                });
            } else {
                downs.push((version, path));
            }
        }
        self.downs = downs;
    }
}

fn has_postgres_suffix(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    POP_POSTGRES.iter().any(|d| {
        [".up.sql", ".down.sql", ".sql"]
            .iter()
            .any(|end| name.ends_with(&format!(".{d}{end}")))
    })
}

/// Families that cannot share a directory.
fn check_mixed(dir: &str, families: &Families) -> Result<(), LayoutError> {
    let mixed = |a: &(&str, String), b: &(&str, String)| LayoutError::Mixed {
        dir: dir.to_owned(),
        first: format!("{} such as {}", a.0, a.1),
        second: format!("{} such as {}", b.0, b.1),
    };
    let exclusive = [
        ("Flyway", "integer"),
        ("Flyway", "diesel"),
        ("diesel", "integer"),
        ("dotted", "integer"),
        ("dotted", "Flyway"),
        ("dotted", "diesel"),
        ("reversible", "plain files"),
        ("plain SQL", "dbmate"),
        ("plain SQL", "goose"),
        ("dbmate", "goose"),
    ];
    for (a, b) in exclusive {
        if let (Some(x), Some(y)) = (families.find(a), families.find(b)) {
            return Err(mixed(x, y));
        }
    }
    Ok(())
}

/// Every down file has its up file, every undo file its versioned one.
fn pair_reversals(
    files: &[VersionedFile],
    ups: &[Version],
    downs: Vec<(Version, PathBuf)>,
    undos: Vec<(Version, PathBuf)>,
) -> Result<Vec<SkippedFile>, LayoutError> {
    let mut skipped = Vec::new();
    for (version, path) in downs {
        if !ups.contains(&version) {
            return Err(LayoutError::OrphanDown {
                file: path.display().to_string(),
            });
        }
        skipped.push(SkippedFile {
            path,
            reason: SkipReason::Down,
        });
    }
    for (version, path) in undos {
        if !files.iter().any(|f| f.version == version) {
            return Err(LayoutError::AmbiguousUndo {
                file: path.display().to_string(),
            });
        }
        skipped.push(SkippedFile {
            path,
            reason: SkipReason::Undo,
        });
    }
    Ok(skipped)
}

#[cfg(test)]
mod tests;
