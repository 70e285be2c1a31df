//! The output settings ([`super::style`]) from the command line and the environment.

use std::io::IsTerminal;

use super::style::{self, Verbosity};
use crate::cli::{ColorArg, OutputArgs};

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
    style::set(color, verbosity);
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
