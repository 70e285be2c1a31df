//! P3's throttle table: each pgshift run under the relay load with its throttle
//! setting, the writers' p99 before and during, the copy's time and its slowdown
//! against the run with every limit off, and what the throttle decided.

use std::fmt::Write as _;

use super::{lat, secs};
use crate::bench::results::{RelayRun, P3};

/// The table and the charts of the runs beyond the default one.
pub(super) fn render(out: &mut String, p3: &P3, chart_prefix: &str) {
    let runs = p3.pgshift_runs();
    if runs.iter().all(|r| r.throttle.is_none()) {
        return;
    }
    out.push_str("Each pgshift run under the same load, with its throttle setting. The copy's slowdown is its copy phase over that of the run with every limit off (the throttle also paces the index builds and verification: the change's wall time shows those); the spans are those the throttle slowed or paused the work (shaded on each run's chart).\n\n");
    out.push_str("| run | throttle | p99 before | p99 during | during / before | change wall | copy phase | copy slowdown | slowed | paused | decisions | probe p99, largest | lost writes |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for run in &runs {
        let throttle = run.throttle.as_ref();
        let text = |f: &dyn Fn(&crate::bench::results::ThrottleFigures) -> String| {
            throttle.map_or("–".to_owned(), f)
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.2}× | {} | {} | {} | {} | {} | {} | {} | {} |",
            run.label,
            text(&|t| t.limits.clone()),
            lat(run.before.p99_us),
            lat(run.during.p99_us),
            run.during.p99_us as f64 / run.before.p99_us.max(1) as f64,
            secs((run.change_end_s - run.change_start_s) * 1000.0),
            run.copying_ms()
                .map_or("–".to_owned(), |ms| secs(ms as f64)),
            slowdown(p3, run),
            text(&|t| spans_text(
                t.seconds_at("slow"),
                t.spans.iter().filter(|s| s.pace == "slow").count()
            )),
            text(&|t| spans_text(
                t.seconds_at("paused"),
                t.spans.iter().filter(|s| s.pace == "paused").count()
            )),
            text(&|t| t.decisions.to_string()),
            text(&|t| t
                .probe_p99_max_ms
                .map_or("–".to_owned(), |ms| format!("{ms:.1} ms"))),
            run.oracle.as_ref().map_or("not checked".to_owned(), |o| {
                (o.lost + o.resurrected + o.wrong_content + o.phantom + o.duplicated).to_string()
            })
        );
    }
    out.push('\n');
    for run in runs.iter().skip(1) {
        let _ = writeln!(
            out,
            "![writers during the {}]({chart_prefix}{})\n",
            run.label, run.chart
        );
    }
}

/// The copy's slowdown of `run` in words.
fn slowdown(p3: &P3, run: &RelayRun) -> String {
    if p3
        .unthrottled
        .as_ref()
        .is_some_and(|u| std::ptr::eq(u, run))
    {
        return "(baseline)".to_owned();
    }
    p3.copy_slowdown(run)
        .map_or("not measured".to_owned(), |s| format!("{s:.2}×"))
}

/// `3.5 s in 2 spans`, or `none`.
pub(super) fn spans_text(seconds: f64, spans: usize) -> String {
    match spans {
        0 => "none".to_owned(),
        1 => format!("{} in 1 span", secs(seconds * 1000.0)),
        n => format!("{} in {n} spans", secs(seconds * 1000.0)),
    }
}
