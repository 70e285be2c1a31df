//! `pgshift audit`: the live database's triggers, and every way a write gets past one.

use serde::Serialize;

use pgshift::audit::audit;
use pgshift::connect::{connect, ConnectionSpec, SessionBudgets};
use pgshift::report::{self, AuditReport};

use crate::cli::{AuditArgs, Format};
use crate::exit;
use crate::render;

/// Runs `pgshift audit` and returns the exit code.
pub fn run(args: &AuditArgs) -> u8 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            return fail(
                args.format,
                "runtime",
                format!("cannot start the async runtime: {err}"),
            )
        }
    };
    runtime.block_on(run_async(args))
}

async fn run_async(args: &AuditArgs) -> u8 {
    let text = super::connection::connection_text(args.url.as_deref());
    let spec = match ConnectionSpec::parse(&text) {
        Ok(spec) => spec,
        Err(err) => {
            return fail(
                args.format,
                "invalid-url",
                format!("the connection string is not valid: {err}"),
            )
        }
    };
    let session = match connect(&spec, &SessionBudgets::READ_ONLY_PLAN).await {
        Ok(session) => session,
        Err(err) => {
            return fail(
                args.format,
                "connect-failed",
                format!("cannot connect to {}: {err}", spec.redacted()),
            )
        }
    };
    let audited = match audit(session.client()).await {
        Ok(audited) => audited,
        Err(err) => {
            return fail(
                args.format,
                "catalog-read-failed",
                format!("cannot read the catalog: {err}"),
            )
        }
    };
    let code = if audited.has_bypass() {
        exit::FINDINGS
    } else {
        exit::OK
    };
    let report = AuditReport::of(&audited, code);
    match args.format {
        Format::Json => render::print_json(&report),
        Format::Text => print!("{}", render::audit(&report, &spec.redacted())),
    }
    code
}

/// The error document under `--format json` (the shape every command's errors take:
/// `kind: "error"`, a stable `code`, the `message`, the `exit_code`).
#[derive(Serialize)]
struct ErrorReport<'a> {
    format_version: u32,
    tool: &'static str,
    tool_version: &'static str,
    command: &'static str,
    kind: &'static str,
    code: &'static str,
    message: &'a str,
    hint: Option<&'a str>,
    exit_code: u8,
}

/// Says why the audit could not run (stderr; and one JSON document on stdout under
/// `--format json`) and returns exit code 1.
fn fail(format: Format, code: &'static str, message: String) -> u8 {
    eprintln!("pgshift audit: {message}");
    if format == Format::Json {
        render::print_json(&ErrorReport {
            format_version: report::FORMAT_VERSION,
            tool: report::TOOL,
            tool_version: report::TOOL_VERSION,
            command: "audit",
            kind: "error",
            code,
            message: &message,
            hint: None,
            exit_code: exit::INPUT_ERROR,
        });
    }
    exit::INPUT_ERROR
}
