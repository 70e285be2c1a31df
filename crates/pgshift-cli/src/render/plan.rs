//! A plan for people: per statement, the route, the locks and what they block, the
//! work, the live facts of the table, the reasons and the exact steps.

use std::fmt::Write;

use pgshift::catalog::{RelationFacts, RelationKind, TriggerEnabled};
use pgshift::classify::{Classification, LockTaken, RelatedTo, WorkClass};
use pgshift::exec::cas_locks::CasLocks;
use pgshift::lock::LockMode;
use pgshift::report::{PlanReport, PlannedStatement};
use pgshift::route::Route;

use super::style::{paint, verbosity, Tone, Verbosity};

/// The whole plan as text. Quiet: only refused statements and the summary. Verbose:
/// each statement's whole SQL.
pub fn plan(report: &PlanReport, target: &str) -> String {
    let mut out = String::new();
    if let Some(server) = &report.server {
        let _ = writeln!(out, "Plan against PostgreSQL {} ({target})", server.version);
    }
    for layout in &report.layouts {
        let _ = writeln!(
            out,
            "{}: layout: {}",
            layout.path, layout.layout.description
        );
    }
    if !report.applied.is_empty() {
        let n = report.applied.len();
        let _ = writeln!(
            out,
            "{n} file{} already applied (pgshift.migrations), not planned; the last: {}",
            if n == 1 { "" } else { "s" },
            report.applied[n - 1]
        );
    }
    for file in &report.files {
        let _ = writeln!(out, "\n{}", file.path);
        if let Some(split) = &file.split {
            let _ = writeln!(out, "  {}", split.describe());
        }
        if file.statements.is_empty() {
            let _ = writeln!(out, "  (no statements)");
        }
        for statement in file.statements.iter().filter(|s| {
            verbosity() > Verbosity::Quiet || s.classification.route.refusal().is_some()
        }) {
            render_statement(&mut out, statement, &report.relations);
        }
    }
    let s = &report.summary;
    let summary = format!(
        "{} statement{}: {} native, {} native sequence, {} copy-and-swap, {} refused",
        s.statements,
        if s.statements == 1 { "" } else { "s" },
        s.native,
        s.native_sequence,
        s.copy_and_swap,
        s.refused
    );
    let tone = if s.refused > 0 { Tone::Bad } else { Tone::Good };
    let _ = writeln!(out, "\n{}", paint(tone, &summary));
    out
}

fn render_statement(out: &mut String, statement: &PlannedStatement, relations: &[RelationFacts]) {
    let c = &statement.classification;
    let first_line = statement.sql.lines().next().unwrap_or("");
    let more = if statement.sql.lines().count() > 1 {
        " …"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "  {}:{}  {first_line}{more}",
        statement.line, statement.column
    );
    if verbosity() == Verbosity::Verbose && !more.is_empty() {
        for line in statement.sql.lines().skip(1) {
            let _ = writeln!(out, "        {line}");
        }
    }
    let _ = writeln!(out, "      route: {}", route_line(&c.route));
    // The headline is what pgshift runs; the statement as written has a line of its own
    // when that is something else.
    match (&c.route, &statement.copy_and_swap) {
        (Route::NativeSequence { steps }, _) => {
            let work = steps
                .iter()
                .map(|s| s.work)
                .max()
                .unwrap_or(WorkClass::None);
            let _ = writeln!(
                out,
                "      work:  the heaviest step's: {}",
                work_words(work)
            );
            let _ = writeln!(out, "      locks: each step's own, below");
            render_as_written(out, c, relations);
        }
        (Route::CopyAndSwap, Some(cas)) => {
            let _ = writeln!(
                out,
                "      work:  a copy into a shadow table while reads and writes go on, its indexes built there, then a brief swap"
            );
            // Its blocking form (the statement as written) is the last line of these.
            render_cas_locks(out, cas, relations);
        }
        _ => {
            let _ = writeln!(out, "      work:  {}", work_words(c.work));
            render_locks(out, c, relations);
        }
    }
    let tables: Vec<&RelationFacts> = c
        .locks
        .iter()
        .filter_map(|lock| {
            relations
                .iter()
                .find(|r| r.name.matches(&lock.relation) && r.kind.is_table())
        })
        .collect();
    // A partition whose parent has a line of its own is counted in that line.
    for relation in tables.iter().filter(|relation| {
        !tables
            .iter()
            .any(|parent| parent.partitions.iter().any(|p| p.name == relation.name))
    }) {
        let _ = writeln!(out, "      table: {}", table_summary(relation));
    }
    if c.destructive {
        let _ = writeln!(out, "      destroys data: yes");
    }
    for reason in &c.reasons {
        let _ = writeln!(out, "      why:   {reason}");
    }
    render_route_details(out, c);
}

/// The statement as written, for comparison with what pgshift runs: its work and its
/// strongest lock on each relation it names.
fn render_as_written(out: &mut String, c: &Classification, relations: &[RelationFacts]) {
    let locks: Vec<String> = c
        .locks
        .iter()
        .filter(|lock| lock.related_to.is_none())
        .map(|lock| lock_words(lock, relations))
        .collect();
    let _ = writeln!(
        out,
        "      as written (not what runs): {}{}",
        work_words(c.work),
        if locks.is_empty() {
            String::new()
        } else {
            format!("; {}", locks.join("; "))
        }
    );
}

/// `ACCESS EXCLUSIVE on public.t and its 8 partitions: blocks all reads and writes`.
fn lock_words(lock: &LockTaken, relations: &[RelationFacts]) -> String {
    let facts = relations.iter().find(|r| r.name.matches(&lock.relation));
    let partitions = match facts {
        Some(f) if lock.recurses && !f.partitions.is_empty() => {
            format!(" and its {} partitions", f.partitions.len())
        }
        _ => String::new(),
    };
    format!(
        "{} on {}{partitions}: {}",
        lock.mode.sql_name(),
        lock.relation,
        lock.mode.blocks_description()
    )
}

/// The locks a copy-and-swap run takes, phase by phase, then the statement-as-written's
/// for comparison.
fn render_cas_locks(out: &mut String, cas: &CasLocks, relations: &[RelationFacts]) {
    let _ = writeln!(out, "      locks pgshift takes (copy-and-swap):");
    for (number, lock) in cas.locks.iter().enumerate() {
        let partitions = match lock.partitions {
            0 => String::new(),
            n => format!(" and its {n} partitions"),
        };
        let budget = match (lock.lock_timeout_ms, lock.attempts) {
            (Some(ms), Some(attempts)) => {
                format!("; waited for at most {ms} ms per attempt, {attempts} attempts")
            }
            (Some(ms), None) => format!("; waited for at most {ms} ms"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "        {}. {}: {} on {}{partitions}: {}{budget}",
            number + 1,
            lock.purpose,
            lock.mode.sql_name(),
            lock.relation,
            lock.blocks
        );
        let _ = writeln!(out, "           held: {}", lock.held);
        if lock.phase == "swap" && !cas.swap_also_locks.is_empty() {
            let names: Vec<String> = cas
                .swap_also_locks
                .iter()
                .map(ToString::to_string)
                .collect();
            let _ = writeln!(
                out,
                "           also ACCESS EXCLUSIVE on {} (foreign keys re-pointed, views recreated) inside the swap",
                names.join(", ")
            );
        }
    }
    for lock in &cas.blocking_form {
        let _ = writeln!(
            out,
            "      blocking form (what --allow-blocking would take, for the whole rewrite): {}",
            lock_words(lock, relations)
        );
    }
}

/// The locks: on the relations the statement names, then on related relations (named
/// ones grouped by their role), then on those only a role describes.
fn render_locks(out: &mut String, c: &Classification, relations: &[RelationFacts]) {
    let mut related: Vec<(&RelatedTo, LockMode, Vec<String>)> = Vec::new();
    for lock in &c.locks {
        let facts = relations.iter().find(|r| r.name.matches(&lock.relation));
        // Partitions the classifier lists as locks of their own are not counted twice.
        let listed = |f: &RelationFacts| {
            f.partitions
                .iter()
                .all(|p| c.locks.iter().any(|l| l.relation.matches(&p.name)))
        };
        let partitions = match facts {
            Some(f) if lock.recurses && !f.partitions.is_empty() && !listed(f) => {
                format!(" and its {} partitions", f.partitions.len())
            }
            _ => String::new(),
        };
        if let Some(to) = &lock.related_to {
            let name = format!("{}{partitions}", lock.relation);
            match related
                .iter_mut()
                .find(|(t, mode, _)| *t == to && *mode == lock.mode)
            {
                Some((_, _, names)) => names.push(name),
                None => related.push((to, lock.mode, vec![name])),
            }
            continue;
        }
        let _ = writeln!(
            out,
            "      lock:  {} on {}{partitions}: {}",
            lock.mode.sql_name(),
            lock.relation,
            lock.mode.blocks_description()
        );
        if let Some(index_mode) = lock.index_mode {
            let _ = writeln!(
                out,
                "      lock:  {} on each index of {}: {}",
                index_mode.sql_name(),
                lock.relation,
                index_mode.blocks_description()
            );
        }
    }
    for (to, mode, names) in related {
        let _ = writeln!(
            out,
            "      lock:  {} on {} ({}): {}",
            mode.sql_name(),
            names.join(", "),
            to.role.describe(&to.of),
            mode.blocks_description()
        );
    }
    for lock in &c.related_locks {
        let _ = writeln!(
            out,
            "      lock:  at most {} on {}{}: {}",
            lock.mode.sql_name(),
            lock.description,
            if lock.recurses {
                " (and their partitions)"
            } else {
                ""
            },
            lock.mode.blocks_description()
        );
    }
}

fn render_route_details(out: &mut String, c: &Classification) {
    match &c.route {
        Route::NativeSequence { steps } => {
            let _ = writeln!(out, "      steps:");
            for (number, step) in steps.iter().enumerate() {
                let lock = step
                    .lock
                    .as_ref()
                    .map(|l| format!("{} on {}", l.mode.sql_name(), l.relation))
                    .unwrap_or_else(|| "no table lock".to_owned());
                let outside = if step.transactional {
                    ""
                } else {
                    ", outside a transaction"
                };
                let _ = writeln!(out, "        {}. {};", number + 1, step.sql);
                let _ = writeln!(
                    out,
                    "           [{lock}; {}{outside}]",
                    work_words(step.work)
                );
            }
        }
        Route::Refused { refusal } => {
            let _ = writeln!(out, "      refused: {}", refusal.message);
            out.push_str(&super::do_this(refusal, "      "));
        }
        Route::Native | Route::CopyAndSwap => {}
    }
}

fn route_line(route: &Route) -> String {
    match route {
        Route::Native => "native, as written, under a bounded lock budget".to_owned(),
        Route::NativeSequence { steps } => format!(
            "native sequence of {} step{}, each committed on its own",
            steps.len(),
            if steps.len() == 1 { "" } else { "s" }
        ),
        Route::CopyAndSwap => "copy-and-swap (online rewrite through a shadow table)".to_owned(),
        Route::Refused { refusal } => paint(
            Tone::Bad,
            &format!("REFUSED ({}, {})", refusal.cause, refusal.class.name()),
        ),
    }
}

fn work_words(work: WorkClass) -> &'static str {
    match work {
        WorkClass::None => "none",
        WorkClass::Read => "reads rows",
        WorkClass::CatalogOnly => "catalog only",
        WorkClass::ConcurrentBuild => "concurrent build or validation (reads and writes continue)",
        WorkClass::DataChange => "changes rows",
        WorkClass::ScanUnderLock => "full scan under the lock",
        WorkClass::Rewrite => "full rewrite under the lock",
        WorkClass::Opaque => "unknown (procedural code)",
    }
}

/// `partitioned (8 partitions), 1.2 GB, ~2,400,000 rows, 5 triggers (5 origin)`.
fn table_summary(facts: &RelationFacts) -> String {
    let mut parts = vec![facts.name.to_string()];
    if facts.kind == RelationKind::PartitionedTable {
        parts.push(format!(
            "partitioned ({} partitions)",
            facts.partitions.len()
        ));
    }
    parts.push(human_bytes(facts.sizes.total_bytes));
    if facts.row_estimate >= 0 {
        parts.push(format!("~{} rows", facts.row_estimate));
    } else {
        parts.push("rows unknown (never analysed)".to_owned());
    }
    if !facts.triggers.is_empty() {
        let origin = facts
            .triggers
            .iter()
            .filter(|t| t.enabled == TriggerEnabled::Origin)
            .count();
        parts.push(format!(
            "{} trigger{} ({origin} ORIGIN-enabled)",
            facts.triggers.len(),
            if facts.triggers.len() == 1 { "" } else { "s" }
        ));
    }
    if !facts.foreign_keys_in.is_empty() {
        parts.push(format!("{} foreign keys in", facts.foreign_keys_in.len()));
    }
    if !facts.dependent_views.is_empty() {
        parts.push(format!("{} dependent views", facts.dependent_views.len()));
    }
    parts.join(", ")
}

pub(super) fn human_bytes(bytes: i64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}
