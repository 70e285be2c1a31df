//! `migrations_dir`: the migrations-directory reader, on a real directory made from
//! the bytes.
//!
//! The bytes are entries separated by NUL bytes; an entry's first line is a file name
//! (any bytes but `/`; a name whose line ends in `/` makes a directory instead) and
//! the rest is the file's content. The directory is read as `migrate` reads it
//! (`migrate::scan`, the gap check, then each file decoded, parsed, judged in the mode
//! its markers choose and scheduled) and as `lint DIR` reads it (`source::expand_inputs`
//! in migration order, each file read under a size limit the first byte chooses).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use pgshift::exec::{schedule, ScheduleOptions};
use pgshift::migrate::{directory::check_no_gaps, scan};
use pgshift::script::{analyze, transaction_mode_for, Knowledge, TransactionMode};
use pgshift::source::{self, InputPath, DEFAULT_MAX_FILE_BYTES};

use crate::input::within_limit;
use crate::scratch::with_empty_dir;

/// At most this many entries are made (a directory listing is not the interesting
/// part past that).
const MAX_ENTRIES: usize = 24;

/// The longest file name a Linux file system takes.
const NAME_MAX: usize = 255;

/// Runs one input.
pub fn migrations_dir(data: &[u8]) {
    if !within_limit(data) {
        return;
    }
    let limit = match data.first() {
        Some(&byte) if byte < 64 => u64::from(byte),
        _ => DEFAULT_MAX_FILE_BYTES,
    };
    with_empty_dir(|dir| {
        for entry in data.split(|&b| b == 0).take(MAX_ENTRIES) {
            make_entry(dir, entry);
        }
        read_as_migrate(dir);
        read_as_lint(dir, limit);
    });
}

/// Makes one file or directory; names the file system refuses are skipped.
fn make_entry(dir: &Path, entry: &[u8]) {
    let (line, content) = match entry.iter().position(|&b| b == b'\n') {
        Some(at) => (&entry[..at], &entry[at + 1..]),
        None => (entry, &[][..]),
    };
    let is_dir = line.ends_with(b"/");
    let name: Vec<u8> = line
        .iter()
        .filter(|&&b| b != b'/')
        .copied()
        .take(NAME_MAX)
        .collect();
    if name.is_empty() || name == b"." || name == b".." {
        return;
    }
    let path = dir.join(OsStr::from_bytes(&name));
    let _ = if is_dir {
        std::fs::create_dir(&path)
    } else {
        std::fs::write(&path, content)
    };
}

/// `migrate DIR`: versions in strict order, then every file judged and scheduled as
/// a run would before it connects.
fn read_as_migrate(dir: &Path) {
    let files = match scan(dir) {
        Ok(files) => files,
        Err(err) => {
            assert!(!err.to_string().is_empty());
            return;
        }
    };
    // Versioned files in strictly increasing order, then repeatables (no version).
    let versioned: Vec<_> = files.iter().filter_map(|f| f.version.as_ref()).collect();
    assert!(versioned.windows(2).all(|w| w[0] < w[1]));
    assert!(files
        .iter()
        .skip(versioned.len())
        .all(|f| f.version.is_none()));
    if let Err(err) = check_no_gaps(&files) {
        assert!(!err.to_string().is_empty());
    }
    for file in &files {
        let Ok(bytes) = std::fs::read(&file.path) else {
            continue;
        };
        let Ok(source) = source::decode(file.path.display().to_string(), bytes) else {
            continue;
        };
        let Ok(forward) = pgshift::layout::forward_sql(file.form, file.transaction, &source.text)
        else {
            continue;
        };
        let statements = forward.statements;
        let mode = transaction_mode_for(&statements, TransactionMode::Statement);
        let script = analyze(statements, mode, Knowledge::offline());
        let options = ScheduleOptions {
            max_table_size: None,
            disk_room: None,
            allow_blocking: Vec::new(),
            copy_and_swap: true,
        };
        let _ = schedule(&script, &options);
    }
}

/// `lint DIR`: versioned files first in version order, then the rest by name; each
/// read under `limit` bytes, with a located error when it is not text.
fn read_as_lint(dir: &Path, limit: u64) {
    let inputs = source::expand_inputs(&[dir.display().to_string()]);
    let mut previous: Option<(Option<String>, String)> = None;
    for input in inputs {
        let path = match input {
            Ok(InputPath::File(path)) => path,
            Ok(InputPath::Stdin) => panic!("a directory does not expand to stdin"),
            Err(err) => {
                assert!(!err.to_string().is_empty());
                continue;
            }
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let key = (file_version(&name), name);
        if let Some(previous) = &previous {
            assert!(
                in_migration_order(previous, &key),
                "{previous:?} before {key:?}"
            );
        }
        previous = Some(key);
        match source::read_input(&InputPath::File(path), limit) {
            Ok(file) => assert!(file.text.len() as u64 <= limit),
            Err(err) => assert!(!err.to_string().is_empty()),
        }
    }
}

/// The version a file name carries, as docs/EXECUTION.md states the layouts: leading
/// digits followed by the end of the stem, `_`, `-` or `.up` (integer versions of any
/// width), or Flyway's `V<digits>__`; any other name is unversioned. The digits are
/// returned without leading zeros, so that numbers of any width compare by length
/// first.
fn file_version(name: &str) -> Option<String> {
    let stem = name.strip_suffix(".sql")?;
    let stripped = |digits: &str| digits.trim_start_matches('0').to_owned();
    if let Some(flyway) = stem.strip_prefix('V') {
        if let Some((digits, _)) = flyway.split_once("__") {
            if !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) {
                return Some(stripped(digits));
            }
        }
    }
    let digits: String = stem.chars().take_while(char::is_ascii_digit).collect();
    let rest = &stem[digits.len()..];
    let rest = rest.strip_suffix(".up").unwrap_or(rest);
    if digits.is_empty() || !(rest.is_empty() || rest.starts_with(['_', '-'])) {
        return None;
    }
    Some(stripped(&digits))
}

/// Whether `a` may come before `b`: numbered before unnumbered, by number (of any
/// width), then name.
fn in_migration_order(a: &(Option<String>, String), b: &(Option<String>, String)) -> bool {
    match (&a.0, &b.0) {
        (Some(x), Some(y)) => ((x.len(), x), &a.1) <= ((y.len(), y), &b.1),
        (Some(_), None) => true,
        (None, Some(_)) => false,
        (None, None) => a.1 <= b.1,
    }
}
