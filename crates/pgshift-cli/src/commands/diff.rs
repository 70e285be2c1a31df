//! `pgshift diff`: desired schema files against the live database, as a plan.

use std::io::Read as _;

use pgshift::connect::SessionBudgets;
use pgshift::desired::{compare, CompareError, Desired};
use pgshift::plan::{PlanInput, PlanOptions};
use pgshift::report::DiffReport;
use pgshift::script::TransactionMode;
use pgshift::trace::TraceError;

use super::inputs::ParsedInput;
use crate::cli::{ApplyArgs, DiffArgs, Format};
use crate::errors::CliError;
use crate::exit;
use crate::render;

/// Runs `pgshift diff` and returns the exit code.
pub fn run(args: &DiffArgs) -> u8 {
    let result = super::runtime().and_then(|runtime| runtime.block_on(run_async(args)));
    result.unwrap_or_else(|err| err.report("diff", args.format))
}

async fn run_async(args: &DiffArgs) -> Result<u8, CliError> {
    let spec = super::spec(args.url.as_deref())?;
    if let Some(out) = args.out.as_deref().filter(|o| o.exists()) {
        return Err(CliError::new(
            "output-exists",
            format!("{} exists: diff never overwrites", out.display()),
        )
        .exit(exit::FINDINGS));
    }
    let desired = read_desired(&args.desired)?;
    let conninfo = super::connection::connection_text(args.url.as_deref());
    if args.format == Format::Text {
        eprintln!(
            "pgshift diff: building {} and the desired schema on a throwaway cluster …",
            spec.redacted()
        );
    }
    let compared = compare(&conninfo, &desired, &args.schema)
        .await
        .map_err(|e| failure(&e))?;
    let script = compared.script();
    let plan = if compared.changes.is_empty() {
        None
    } else {
        let statements = pgshift_sql::parse(&script).map_err(|e| {
            CliError::new("plan-failed", format!("the plan's SQL does not parse: {e}"))
        })?;
        let session = super::session(&spec, &SessionBudgets::READ_ONLY_PLAN).await?;
        let input = PlanInput {
            path: "desired-plan.sql".to_owned(),
            statements,
        };
        Some(
            super::plan::plan_report(
                &session,
                vec![input],
                TransactionMode::Statement,
                &args.cas.options(),
                &PlanOptions::default(),
            )
            .await
            .map_err(|err| CliError::new("plan-failed", err.to_string()))?,
        )
    };
    let code = if plan.as_ref().is_some_and(|p| p.summary.refused > 0) {
        exit::FINDINGS
    } else {
        exit::OK
    };
    if let Some(out) = &args.out {
        std::fs::write(out, &script).map_err(|e| {
            CliError::new(
                "write-failed",
                format!("cannot write {}: {e}", out.display()),
            )
        })?;
    }
    let report = DiffReport::of(&compared, plan, code);
    match args.format {
        Format::Json => render::print_json(&report),
        Format::Text => print!("{}", render::diff(&report, &spec.redacted())),
    }
    Ok(code)
}

/// `apply --desired`: the plan of the desired files as apply's input, once the
/// fingerprint and the destructive guard pass; `None` when there is nothing to do
/// (said on stderr).
pub(crate) async fn desired_input(
    args: &ApplyArgs,
    desired: &str,
) -> Result<Option<ParsedInput>, CliError> {
    super::spec(args.url.as_deref())?;
    let desired = read_desired(desired)?;
    let conninfo = super::connection::connection_text(args.url.as_deref());
    let compared = compare(&conninfo, &desired, &args.schema)
        .await
        .map_err(|e| failure(&e))?;
    // INV: DS-3 — a stale review or an unacknowledged destructive change refuses the
    // whole plan before anything runs.
    if let Some(expected) = &args.expect_fingerprint {
        if *expected != compared.fingerprint {
            return Err(CliError::new(
                "fingerprint-mismatch",
                format!(
                    "the database or the plan changed since the review: --expect-fingerprint {expected}, now {}; nothing was run",
                    compared.fingerprint
                ),
            )
            .hint("run pgshift diff again, review the plan, and give its fingerprint")
            .exit(exit::FINDINGS));
        }
    }
    // INV: DS-4 — changes of row-level security, policies and grants run only with a
    // matching review of them.
    if let Some(review) = &compared.access_review {
        let listed: Vec<String> = compared
            .access
            .iter()
            .map(|a| format!("{} ({})", a.object, render::impact_words(a.impact)))
            .collect();
        match &args.expect_rls_review {
            Some(given) if given == review => {}
            Some(given) => {
                return Err(CliError::new(
                    "access-review-mismatch",
                    format!(
                        "the access review does not match: --expect-rls-review {given}, but the plan's access changes are {review}: {}; nothing was run",
                        listed.join(", ")
                    ),
                )
                .hint("review the access changes pgshift diff lists, and give their fingerprint")
                .exit(exit::FINDINGS));
            }
            None => {
                return Err(CliError::new(
                    "access-review-required",
                    format!(
                        "the plan changes who may read or write: {}; nothing was run",
                        listed.join(", ")
                    ),
                )
                .hint(format!(
                    "review them, then give --expect-rls-review {review}"
                ))
                .exit(exit::FINDINGS));
            }
        }
    }
    let allowed = args.allow_destructive.as_deref();
    let refused: Vec<&str> = compared
        .changes
        .iter()
        .filter(|c| c.destructive)
        .filter(|c| match allowed {
            None => true,
            Some([]) => false,
            Some(names) => !names.contains(&c.object),
        })
        .map(|c| c.object.as_str())
        .collect();
    if !refused.is_empty() {
        return Err(CliError::new(
            "destructive-not-allowed",
            format!(
                "the plan has destructive changes not acknowledged: {}; nothing was run",
                refused.join(", ")
            ),
        )
        .hint("review them with pgshift diff, then give --allow-destructive (all) or --allow-destructive OBJECT … (those named)")
        .exit(exit::FINDINGS));
    }
    if compared.changes.is_empty() {
        // Converged: what diff says, as the one document --format json promises.
        match args.format {
            Format::Json => render::print_json(&DiffReport::of(&compared, None, exit::OK)),
            Format::Text => eprintln!(
                "pgshift apply: nothing to do, the database already has the desired schema"
            ),
        }
        return Ok(None);
    }
    let statements = pgshift_sql::parse(&compared.script())
        .map_err(|e| CliError::new("plan-failed", format!("the plan's SQL does not parse: {e}")))?;
    Ok(Some(ParsedInput {
        path: "desired-plan.sql".to_owned(),
        statements,
    }))
}

pub(crate) fn read_desired(desired: &str) -> Result<Desired, CliError> {
    if desired == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| CliError::new("input-unreadable", format!("cannot read stdin: {e}")))?;
        Ok(Desired::Text(text))
    } else {
        Ok(Desired::Path(desired.into()))
    }
}

fn failure(err: &CompareError) -> CliError {
    let code = match err {
        CompareError::Diff(_) | CompareError::Layout(_) => "not-covered",
        CompareError::NotConverged(_) => "not-converged",
        CompareError::DesiredDidNotRun(_) => "desired-did-not-run",
        CompareError::Trace(TraceError::Connect(_)) => "connect-failed",
        _ => "diff-failed",
    };
    let failure = CliError::new(code, err.to_string());
    if err.is_refusal() {
        failure.exit(exit::FINDINGS)
    } else {
        failure
    }
}
