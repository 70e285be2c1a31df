//! Output settings of the whole process: whether text output is coloured, and how much
//! it says (`-q`, `-v`). Set once from the flags before a command runs; renderers read
//! them. Machine formats (JSON, GitHub, SARIF) never call [`paint`]. No dependency on
//! the command line, so the library target (`lib.rs`) can compile it for the fuzz targets.

use std::sync::OnceLock;

/// How much text output says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verbosity {
    /// Only the verdict and errors.
    Quiet,
    /// The default.
    Normal,
    /// More detail: whole statements, every attempt, next steps.
    Verbose,
}

#[derive(Clone, Copy, Debug)]
struct Settings {
    color: bool,
    verbosity: Verbosity,
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();

/// Fixes the settings (first call wins); `render::output_flags` derives them from the
/// command line.
pub fn set(color: bool, verbosity: Verbosity) {
    let _ = SETTINGS.set(Settings { color, verbosity });
}

fn settings() -> Settings {
    SETTINGS.get().copied().unwrap_or(Settings {
        color: false,
        verbosity: Verbosity::Normal,
    })
}

/// How much to say.
pub fn verbosity() -> Verbosity {
    settings().verbosity
}

/// What a piece of text is, for its colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    /// An error-severity finding, a refusal, a failure.
    Bad,
    /// A warning.
    Caution,
    /// A note.
    Note,
    /// Clean, done.
    Good,
    /// A heading.
    Heading,
}

/// `text` in the colour of `tone` when colour is on, else as is.
pub fn paint(tone: Tone, text: &str) -> String {
    if !settings().color || text.is_empty() {
        return text.to_owned();
    }
    let code = match tone {
        Tone::Bad => "1;31",
        Tone::Caution => "1;33",
        Tone::Note => "1;36",
        Tone::Good => "1;32",
        Tone::Heading => "1",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}
