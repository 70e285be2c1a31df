//! `pgshift completions SHELL` and `pgshift man`: what shells and `man` need, generated
//! from the same flag definitions as `--help`.

use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs};
use crate::exit;

/// Prints the completion script of a shell.
pub fn completions(args: &CompletionsArgs) -> u8 {
    let mut command = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut command, "pgshift", &mut out);
    write_stdout("completions", &out)
}

/// Prints the manual page (roff): the command, then a section per subcommand.
pub fn man() -> u8 {
    let mut out = Vec::new();
    match render_man(&mut out) {
        Ok(()) => write_stdout("man", &out),
        Err(err) => {
            eprintln!("pgshift man: cannot render the page: {err}");
            exit::INPUT_ERROR
        }
    }
}

/// Writes `bytes` to stdout; a closed pipe (`| head`) is not an error.
fn write_stdout(command: &str, bytes: &[u8]) -> u8 {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => exit::OK,
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => exit::OK,
        Err(err) => {
            eprintln!("pgshift {command}: cannot write: {err}");
            exit::INPUT_ERROR
        }
    }
}

fn render_man(out: &mut Vec<u8>) -> std::io::Result<()> {
    let command = Cli::command();
    let man = clap_mangen::Man::new(command.clone());
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = sub.get_name();
        let sub = sub.clone().bin_name(format!("pgshift {name}"));
        let page = clap_mangen::Man::new(sub);
        out.extend_from_slice(format!(".SH \"PGSHIFT {}\"\n", name.to_uppercase()).as_bytes());
        page.render_synopsis_section(&mut *out)?;
        page.render_description_section(&mut *out)?;
        page.render_options_section(&mut *out)?;
    }
    man.render_extra_section(out)?;
    man.render_version_section(out)?;
    Ok(())
}
