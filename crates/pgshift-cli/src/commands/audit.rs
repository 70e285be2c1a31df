//! `pgshift audit`: the live database's triggers, and every way a write gets past one.

use pgshift::audit::audit;
use pgshift::connect::SessionBudgets;
use pgshift::report::AuditReport;

use crate::cli::{AuditArgs, Format};
use crate::errors::CliError;
use crate::exit;
use crate::render;

/// Runs `pgshift audit` and returns the exit code.
pub fn run(args: &AuditArgs) -> u8 {
    let result = super::runtime().and_then(|runtime| runtime.block_on(run_async(args)));
    result.unwrap_or_else(|err| err.report("audit", args.format))
}

async fn run_async(args: &AuditArgs) -> Result<u8, CliError> {
    let spec = super::spec(args.url.as_deref())?;
    let session = super::session(&spec, &SessionBudgets::READ_ONLY_PLAN).await?;
    let audited = audit(session.client()).await.map_err(|err| {
        CliError::new(
            "catalog-read-failed",
            format!("cannot read the catalog: {err}"),
        )
    })?;
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
    Ok(code)
}
