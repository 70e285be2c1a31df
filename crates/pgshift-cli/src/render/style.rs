//! Output settings of the whole process: whether text output is coloured, and how much
//! it says (`-q`, `-v`). Set once from the flags before a command runs; renderers read
//! them. Machine formats (JSON, GitHub, SARIF) never call [`paint`].

use std::io::IsTerminal;
use std::sync::OnceLock;

use crate::cli::{ColorArg, OutputArgs};

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

/// Fixes the settings from the flags and the environment (first call wins).
pub fn init(args: &OutputArgs) {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
    let color = color_enabled(args.color, std::io::stdout().is_terminal(), no_color, dumb);
    let verbosity = if args.quiet {
        Verbosity::Quiet
    } else if args.verbose {
        Verbosity::Verbose
    } else {
        Verbosity::Normal
    };
    let _ = SETTINGS.set(Settings { color, verbosity });
}

/// Whether to colour: `always` and `never` are taken at their word; `auto` colours a
/// terminal unless `NO_COLOR` is set to something or `TERM` is `dumb`.
fn color_enabled(choice: ColorArg, terminal: bool, no_color: bool, dumb: bool) -> bool {
    match choice {
        ColorArg::Always => true,
        ColorArg::Never => false,
        ColorArg::Auto => terminal && !no_color && !dumb,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_colours_only_a_terminal_without_no_color() {
        assert!(color_enabled(ColorArg::Auto, true, false, false));
        assert!(!color_enabled(ColorArg::Auto, false, false, false));
        assert!(!color_enabled(ColorArg::Auto, true, true, false));
        assert!(!color_enabled(ColorArg::Auto, true, false, true));
        assert!(color_enabled(ColorArg::Always, false, true, true));
        assert!(!color_enabled(ColorArg::Never, true, false, false));
    }
}
