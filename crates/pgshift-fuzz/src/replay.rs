//! The stable harness: a target run over its committed corpus, then over a fixed-seed
//! batch of mutations of it, each input under `catch_unwind` so that a panic is
//! reported with the input that caused it (saved to a file, to replay with
//! `cargo fuzz run <target> <file>` or [`run_file`]).
//!
//! `PGSHIFT_FUZZ_MUTATIONS` sets the batch size (default [`DEFAULT_MUTATIONS`]) and
//! `PGSHIFT_FUZZ_SEED` the seed (default [`DEFAULT_SEED`]).

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use crate::mutate::{mutate, Rng};
use crate::Target;

/// Mutations per target in the default run: small enough that every target together
/// stays well under a minute of `cargo test` on two cores.
pub const DEFAULT_MUTATIONS: usize = 1500;

/// The seed of the default run.
pub const DEFAULT_SEED: u64 = 0x7067_7368_6966_7421;

/// The largest mutated input (libFuzzer's `-max_len` in `docs/FUZZING.md`).
pub const MAX_MUTATED_LEN: usize = 64 * 1024;

/// How much to run.
#[derive(Clone, Copy, Debug)]
pub struct ReplayConfig {
    /// Mutated inputs after the corpus.
    pub mutations: usize,
    /// The generator's seed.
    pub seed: u64,
}

impl ReplayConfig {
    /// The configuration from `PGSHIFT_FUZZ_MUTATIONS` and `PGSHIFT_FUZZ_SEED`, else the
    /// defaults.
    pub fn from_env() -> Self {
        let number = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse().ok());
        ReplayConfig {
            mutations: number("PGSHIFT_FUZZ_MUTATIONS")
                .and_then(|n: u64| usize::try_from(n).ok())
                .unwrap_or(DEFAULT_MUTATIONS),
            seed: number("PGSHIFT_FUZZ_SEED").unwrap_or(DEFAULT_SEED),
        }
    }
}

/// What a replay ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplaySummary {
    /// Corpus inputs run.
    pub corpus: usize,
    /// Mutated inputs run.
    pub mutations: usize,
}

/// A panic, with the input that caused it.
#[derive(Debug)]
pub struct ReplayFailure {
    /// The target.
    pub target: &'static str,
    /// The panic's message.
    pub message: String,
    /// Where the input was saved.
    pub saved: PathBuf,
}

impl fmt::Display for ReplayFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} panicked: {}\n  input saved to {}\n  replay: cargo fuzz run {} {}",
            self.target,
            self.message,
            self.saved.display(),
            self.target,
            self.saved.display()
        )
    }
}

/// The corpus files of a directory, sorted by name.
pub fn corpus(dir: &Path) -> std::io::Result<Vec<Vec<u8>>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.is_file())
        .collect();
    paths.sort();
    paths.iter().map(std::fs::read).collect()
}

/// Runs `target` over `corpus`, then over `config.mutations` mutations of it; the
/// first panic stops the run, its input saved under `failures`.
pub fn replay(
    target: Target,
    corpus: &[Vec<u8>],
    config: &ReplayConfig,
    failures: &Path,
) -> Result<ReplaySummary, ReplayFailure> {
    for input in corpus {
        run_one(target, input, failures)?;
    }
    let mut rng = Rng::new(config.seed ^ name_hash(target.name));
    for _ in 0..config.mutations {
        let base: &[u8] = if corpus.is_empty() {
            &[]
        } else {
            &corpus[rng.below(corpus.len())]
        };
        let input = mutate(base, corpus, &mut rng, MAX_MUTATED_LEN);
        run_one(target, &input, failures)?;
    }
    Ok(ReplaySummary {
        corpus: corpus.len(),
        mutations: config.mutations,
    })
}

/// Runs `target` on the contents of one file (a saved failure, a crash artifact).
pub fn run_file(target: Target, path: &Path, failures: &Path) -> Result<(), ReplayFailure> {
    let input = std::fs::read(path).unwrap_or_default();
    run_one(target, &input, failures)
}

fn run_one(target: Target, input: &[u8], failures: &Path) -> Result<(), ReplayFailure> {
    let outcome = catch_unwind(AssertUnwindSafe(|| (target.run)(input)));
    let Err(payload) = outcome else {
        return Ok(());
    };
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a panic without a message".to_owned());
    let _ = std::fs::create_dir_all(failures);
    let saved = failures.join(format!("{}-{:016x}", target.name, content_hash(input)));
    let _ = std::fs::write(&saved, input);
    Err(ReplayFailure {
        target: target.name,
        message,
        saved,
    })
}

/// FNV-1a, to name saved inputs and to give each target its own stream.
fn content_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn name_hash(name: &str) -> u64 {
    content_hash(name.as_bytes())
}
