//! SVG charts of a load run: writer latency (p50, p99 and max per second, on
//! a log scale) above writer throughput (acknowledged writes, and the slots the
//! schedule had to skip because every writer was waiting), with the phases of
//! a schema change drawn as bands; and sampled series over time (a change-log
//! backlog, a replica's replay lag: [`samples`]).
//!
//! The charts are plain SVG written by `plotters` without its TrueType
//! support: the text is laid out by whatever displays the file, so nothing
//! here needs system font libraries.
//!
//! ```no_run
//! # fn run(report: &pgshift_workload::load::LoadReport) -> std::io::Result<()> {
//! use pgshift_workload::chart::{self, PhaseMark};
//!
//! let phases = [PhaseMark::new("copying", 10.0, 42.5), PhaseMark::new("cutover", 42.5, 43.0)];
//! chart::write_latency_chart(
//!     std::path::Path::new("run.svg"),
//!     "ALTER TABLE events … under 200 writes/s",
//!     &report.timeline,
//!     &phases,
//! )?;
//! # Ok(()) }
//! ```

use std::io;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::stats::{write_series, SecondPoint};
use crate::timeline::Timeline;

mod samples;

pub use samples::{format_bytes, write_backlog_chart, write_lag_chart};

/// The size of the charts, in pixels.
const WIDTH: u32 = 1100;
const LATENCY_HEIGHT: u32 = 720;
/// The width of the legend, right of each plot: outside the plot, so that it never
/// hides the data (the cutover's spike is at the right, where a legend in the plot
/// would sit).
const LEGEND_WIDTH: u32 = 300;
/// Where a legend's first entry is, from the top of its strip (level with the plot's
/// top, inside the plot's margin).
const LEGEND_TOP: i32 = 24;

/// How an entry of a legend is drawn.
#[derive(Clone, Copy, Debug)]
enum Glyph {
    /// A phase's band.
    Band(RGBColor),
    /// A line of the plot.
    Line(RGBColor),
}

/// A legend: its entries, top to bottom.
type Legend = Vec<(String, Glyph)>;

/// A line of a chart: its legend, its colour, and its value at a second.
type Line = (&'static str, RGBColor, fn(&SecondPoint) -> f64);

/// A phase of a run, drawn as a band over the seconds it lasted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseMark {
    /// What the phase is (`copying`, `cutover`, `blocking ALTER`, …).
    pub label: String,
    /// When it started, in seconds since the load started.
    pub start_s: f64,
    /// When it ended.
    pub end_s: f64,
}

impl PhaseMark {
    /// A phase from `start_s` to `end_s`.
    pub fn new(label: impl Into<String>, start_s: f64, end_s: f64) -> Self {
        PhaseMark {
            label: label.into(),
            start_s,
            end_s,
        }
    }
}

/// A span of a run during which the throttle slowed or paused the work, shaded
/// on the latency plot (grey: slowed; dark grey: paused), with a legend entry per
/// label.
#[derive(Clone, Debug, PartialEq)]
pub struct ThrottleMark {
    /// What the legend says (`paused: writer p99 (probe)`).
    pub label: String,
    /// Whether the work was paused (else slowed).
    pub paused: bool,
    /// When it started, in seconds since the load started.
    pub start_s: f64,
    /// When it ended.
    pub end_s: f64,
}

/// A sampled backlog, one line of a backlog chart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BacklogLine {
    /// The legend of the line.
    pub label: String,
    /// `(seconds, entries)` samples.
    pub samples: Vec<(f64, i64)>,
}

fn chart_error<E: std::fmt::Display>(e: E) -> io::Error {
    io::Error::other(format!("drawing a chart: {e}"))
}

/// The band colours of successive phases (red is kept for cutovers and
/// blocking statements).
const PHASE_COLOURS: [RGBColor; 6] = [
    RGBColor(66, 133, 244),
    RGBColor(251, 188, 5),
    RGBColor(52, 168, 83),
    RGBColor(154, 96, 201),
    RGBColor(0, 172, 193),
    RGBColor(141, 110, 99),
];

/// The colour of the phase `label` (cutovers and blocking statements are red).
fn phase_colour(index: usize, label: &str) -> RGBColor {
    if label.contains("ACCESS EXCLUSIVE") {
        RGBColor(120, 0, 0)
    } else if label.contains("cutover") || label.contains("blocking") || label.contains("ALTER") {
        RGBColor(234, 67, 53)
    } else {
        PHASE_COLOURS[index % PHASE_COLOURS.len()]
    }
}

/// Draws the latency and throughput chart of `timeline`'s writes into an SVG
/// file at `path`, with `phases` marked. Used by the benchmark command and by
/// `pgshift demo`.
pub fn write_latency_chart(
    path: &Path,
    title: &str,
    timeline: &Timeline,
    phases: &[PhaseMark],
) -> io::Result<()> {
    write_latency_chart_from_series(path, title, &write_series(timeline), phases)
}

/// [`write_latency_chart`] from a per-second series (as kept in a benchmark's
/// JSON), so that a chart can be drawn again without the run.
pub fn write_latency_chart_from_series(
    path: &Path,
    title: &str,
    series: &[SecondPoint],
    phases: &[PhaseMark],
) -> io::Result<()> {
    write_latency_chart_with_throttle(path, title, series, phases, &[])
}

/// [`write_latency_chart_from_series`] with the throttle's decisions shaded on the
/// latency plot.
pub fn write_latency_chart_with_throttle(
    path: &Path,
    title: &str,
    series: &[SecondPoint],
    phases: &[PhaseMark],
    throttle: &[ThrottleMark],
) -> io::Result<()> {
    let root = SVGBackend::new(path, (WIDTH, LATENCY_HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(chart_error)?;
    let root = root
        .titled(title, ("sans-serif", 20).into_font())
        .map_err(chart_error)?;
    let (upper, lower) = root.split_vertically(LATENCY_HEIGHT * 58 / 100);
    let x_max = x_extent(series.len() as f64, phases);
    let (upper, upper_legend) = with_legend_strip(&upper);
    let legend = draw_latency(&upper, series, phases, throttle, x_max)?;
    draw_legend(&upper_legend, &legend, LEGEND_TOP)?;
    let (lower, lower_legend) = with_legend_strip(&lower);
    let legend = draw_throughput(&lower, series, phases, x_max)?;
    draw_legend(&lower_legend, &legend, LEGEND_TOP)?;
    root.present().map_err(chart_error)
}

/// The x range: every second of the series and every phase.
fn x_extent(seconds: f64, phases: &[PhaseMark]) -> f64 {
    phases
        .iter()
        .map(|p| p.end_s)
        .fold(seconds, f64::max)
        .max(1.0)
}

/// Contiguous runs of the points where `value` is positive (a second without
/// writes breaks the line instead of dropping it to zero).
fn segments(series: &[SecondPoint], value: impl Fn(&SecondPoint) -> f64) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut current = Vec::new();
    for point in series {
        let v = value(point);
        if v > 0.0 {
            current.push((point.second as f64 + 0.5, v));
        } else if !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Draws each phase as a translucent band from `y_low` to `y_high`, and returns
/// their legend entries (the bands of short phases are too narrow to carry their
/// names).
fn draw_phase_bands<DB: DrawingBackend>(
    chart: &mut ChartContext<
        '_,
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, impl Ranged<ValueType = f64>>,
    >,
    phases: &[PhaseMark],
    y_low: f64,
    y_high: f64,
) -> io::Result<Legend> {
    let mut legend = Legend::new();
    for (i, phase) in phases.iter().enumerate() {
        let colour = phase_colour(i, &phase.label);
        // A phase shorter than the line width still shows.
        let end = phase.end_s.max(phase.start_s + 0.15);
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(phase.start_s, y_low), (end, y_high)],
                colour.mix(0.2).filled(),
            )))
            .map_err(chart_error)?;
        legend.push((
            format!(
                "{} ({:.1}–{:.1} s)",
                phase.label, phase.start_s, phase.end_s
            ),
            Glyph::Band(colour),
        ));
    }
    Ok(legend)
}

/// Draws each throttle span as a grey band over the plot with a solid strip at its
/// top, and returns one legend entry per label with its spans' count and length.
fn draw_throttle_spans<DB: DrawingBackend>(
    chart: &mut ChartContext<
        '_,
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, impl Ranged<ValueType = f64>>,
    >,
    spans: &[ThrottleMark],
    y_low: f64,
    y_high: f64,
    strip_low: f64,
) -> io::Result<Legend> {
    let colour = |paused: bool| {
        if paused {
            RGBColor(55, 55, 55)
        } else {
            RGBColor(150, 150, 150)
        }
    };
    for span in spans {
        let end = span.end_s.max(span.start_s + 0.15);
        chart
            .draw_series([
                Rectangle::new(
                    [(span.start_s, y_low), (end, y_high)],
                    colour(span.paused).mix(0.22).filled(),
                ),
                // The strip: the top of the plot, from `strip_low`.
                Rectangle::new(
                    [(span.start_s, strip_low), (end, y_high)],
                    colour(span.paused).mix(0.8).filled(),
                ),
            ])
            .map_err(chart_error)?;
    }
    let mut legend = Legend::new();
    let mut labels: Vec<(&str, bool)> = Vec::new();
    for span in spans {
        if !labels.contains(&(span.label.as_str(), span.paused)) {
            labels.push((span.label.as_str(), span.paused));
        }
    }
    for (label, paused) in labels {
        let same: Vec<&ThrottleMark> = spans
            .iter()
            .filter(|s| s.label == label && s.paused == paused)
            .collect();
        let seconds: f64 = same.iter().map(|s| (s.end_s - s.start_s).max(0.0)).sum();
        legend.push((
            format!("{label} ({}×, {seconds:.1} s)", same.len()),
            Glyph::Band(colour(paused)),
        ));
    }
    Ok(legend)
}

/// Draws `legend` in `area` (the strip right of a plot), from `top` down.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    legend: &Legend,
    top: i32,
) -> io::Result<()> {
    for (i, (label, glyph)) in legend.iter().enumerate() {
        let y = top + 20 * i32::try_from(i).unwrap_or(i32::MAX / 40);
        match *glyph {
            Glyph::Band(colour) => area.draw(&Rectangle::new(
                [(8, y - 5), (26, y + 5)],
                colour.mix(0.45).filled(),
            )),
            Glyph::Line(colour) => area.draw(&PathElement::new(
                vec![(8, y), (26, y)],
                colour.stroke_width(2),
            )),
        }
        .map_err(chart_error)?;
        area.draw(&Text::new(
            label.clone(),
            (32, y - 7),
            ("sans-serif", 13).into_font(),
        ))
        .map_err(chart_error)?;
    }
    Ok(())
}

/// `area` split into the plot and, right of it, its legend's strip.
fn with_legend_strip<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
) -> (DrawingArea<DB, Shift>, DrawingArea<DB, Shift>) {
    let width = area.dim_in_pixel().0;
    area.split_horizontally(width.saturating_sub(LEGEND_WIDTH))
}

fn draw_latency<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    series: &[SecondPoint],
    phases: &[PhaseMark],
    throttle: &[ThrottleMark],
    x_max: f64,
) -> io::Result<Legend> {
    let max_ms = series
        .iter()
        .map(|p| p.max_us as f64 / 1000.0)
        .fold(1.0, f64::max);
    let (y_low, y_high) = (0.1, max_ms * 3.0);
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(28)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..x_max, (y_low..y_high).log_scale())
        .map_err(chart_error)?;
    chart
        .configure_mesh()
        .y_desc("write latency (ms, log)")
        .y_label_formatter(&|v| format_ms(*v))
        .x_label_formatter(&|v| format_seconds(*v, x_max))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(chart_error)?;
    let mut legend = draw_phase_bands(&mut chart, phases, y_low, y_high)?;
    // The strip: the top sixth of the log axis.
    let strip_low = y_high / (y_high / y_low).powf(1.0 / 6.0);
    legend.extend(draw_throttle_spans(
        &mut chart, throttle, y_low, y_high, strip_low,
    )?);
    let lines: [Line; 3] = [
        ("p50", RGBColor(30, 90, 200), |p| p.p50_us as f64 / 1000.0),
        ("p99", RGBColor(240, 140, 0), |p| p.p99_us as f64 / 1000.0),
        ("max", RGBColor(200, 30, 30), |p| p.max_us as f64 / 1000.0),
    ];
    for (label, colour, value) in lines {
        let parts = segments(series, value);
        if !parts.is_empty() {
            legend.push((label.to_owned(), Glyph::Line(colour)));
        }
        for segment in parts {
            chart
                .draw_series(LineSeries::new(segment, colour.stroke_width(2)))
                .map_err(chart_error)?;
        }
    }
    Ok(legend)
}

fn draw_throughput<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    series: &[SecondPoint],
    phases: &[PhaseMark],
    x_max: f64,
) -> io::Result<Legend> {
    let y_max = series
        .iter()
        .map(|p| p.acknowledged.max(p.missed_slots).max(p.failed) as f64)
        .fold(10.0, f64::max)
        * 1.15;
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(chart_error)?;
    chart
        .configure_mesh()
        .x_desc("seconds since the load started")
        .y_desc("writes per second")
        .x_label_formatter(&|v| format_seconds(*v, x_max))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(chart_error)?;
    // The bands are named in the latency plot's legend, above.
    draw_phase_bands(&mut chart, phases, 0.0, y_max)?;
    let mut legend = Legend::new();
    let lines: [Line; 3] = [
        ("acknowledged", RGBColor(40, 150, 60), |p| {
            p.acknowledged as f64
        }),
        (
            "skipped slots (all writers waiting)",
            RGBColor(120, 120, 120),
            |p| p.missed_slots as f64,
        ),
        ("failed", RGBColor(200, 30, 30), |p| p.failed as f64),
    ];
    for (label, colour, value) in lines {
        // Throughput drops to zero in a stall: draw the whole line.
        let points: Vec<(f64, f64)> = series
            .iter()
            .map(|p| (p.second as f64 + 0.5, value(p)))
            .collect();
        if points.iter().all(|p| p.1 == 0.0) && label != "acknowledged" {
            continue;
        }
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(2)))
            .map_err(chart_error)?;
        legend.push((label.to_owned(), Glyph::Line(colour)));
    }
    Ok(legend)
}

/// A latency axis label: `0.1`, `2`, `1.5 s`.
fn format_ms(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{} s", trim(ms / 1000.0))
    } else {
        trim(ms)
    }
}

/// A seconds axis label: whole seconds on a long axis, tenths on a short one.
fn format_seconds(v: f64, span: f64) -> String {
    if span < 20.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

fn trim(v: f64) -> String {
    let text = format!("{v:.1}");
    text.strip_suffix(".0").map(str::to_owned).unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::{OpKind, OpResult};
    use std::time::Duration;

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "pgshift-workload-chart-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn a_latency_chart_is_written_as_svg_with_its_phases() {
        let mut timeline = Timeline::default();
        for s in 0..20u64 {
            if (8..11).contains(&s) {
                continue; // a stall: no write starts
            }
            for k in 0..50 {
                timeline.record(
                    OpKind::Insert,
                    Duration::from_millis(s * 1000 + k * 20),
                    Duration::from_micros(800 + k * 30),
                    OpResult::Acknowledged,
                );
            }
        }
        timeline.record(
            OpKind::Insert,
            Duration::from_millis(7990),
            Duration::from_secs(3),
            OpResult::Acknowledged,
        );
        timeline.note_schedule(Duration::from_secs(9), 200, Duration::from_secs(1));
        let dir = temp_dir("latency");
        let path = dir.join("run.svg");
        let phases = [
            PhaseMark::new("copying", 2.0, 8.0),
            PhaseMark::new("blocking ALTER", 8.0, 11.0),
            PhaseMark::new("cutover", 11.0, 11.02),
        ];
        write_latency_chart(&path, "a run <with> & marks", &timeline, &phases).expect("written");
        let svg = std::fs::read_to_string(&path).expect("read");
        assert!(
            svg.starts_with("<svg") || svg.contains("<svg"),
            "{}",
            &svg[..200]
        );
        assert!(svg.trim_end().ends_with("</svg>"));
        for text in [
            "copying",
            "blocking ALTER",
            "cutover",
            "p99",
            "acknowledged",
            "&lt;with&gt;",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    /// The x of each `<text …>label…</text>` of `svg` whose text starts with `label`.
    fn text_x(svg: &str, label: &str) -> Vec<f64> {
        svg.split("<text")
            .skip(1)
            .filter(|t| {
                t.split_once('>')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with(label))
            })
            .filter_map(|t| {
                let (_, after) = t.split_once("x=\"")?;
                after.split('"').next()?.parse().ok()
            })
            .collect()
    }

    /// The legend used to sit in the plot's upper right corner, on the cutover's
    /// spike it exists to explain: it is drawn right of the plot now, where no data is.
    #[test]
    fn throttle_spans_are_shaded_with_one_legend_entry_per_reason() {
        let mut timeline = Timeline::default();
        for s in 0..12u64 {
            timeline.record(
                OpKind::Insert,
                Duration::from_millis(s * 1000),
                Duration::from_micros(900),
                OpResult::Acknowledged,
            );
        }
        let dir = temp_dir("throttle");
        let path = dir.join("run.svg");
        let span = |label: &str, paused: bool, start_s: f64, end_s: f64| ThrottleMark {
            label: label.to_owned(),
            paused,
            start_s,
            end_s,
        };
        let throttle = [
            span("slowed: writer p99 (probe)", false, 2.0, 3.0),
            span("paused: writer p99 (probe)", true, 3.0, 4.5),
            span("slowed: writer p99 (probe)", false, 6.0, 7.0),
        ];
        write_latency_chart_with_throttle(
            &path,
            "throttled",
            &write_series(&timeline),
            &[PhaseMark::new("copying", 1.0, 8.0)],
            &throttle,
        )
        .expect("written");
        let svg = std::fs::read_to_string(&path).expect("read");
        assert!(
            svg.contains("slowed: writer p99 (probe) (2×, 2.0 s)"),
            "{svg}"
        );
        assert!(svg.contains("paused: writer p99 (probe) (1×, 1.5 s)"));
        // The legend lists each reason once.
        assert_eq!(svg.matches("slowed: writer p99").count(), 1);
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn the_legend_is_outside_the_plot_where_no_data_is() {
        let mut timeline = Timeline::default();
        for s in 0..30u64 {
            // The spike at the end, where the cutover is.
            let latency = if s == 27 { 900_000 } else { 900 };
            timeline.record(
                OpKind::Insert,
                Duration::from_millis(s * 1000),
                Duration::from_micros(latency),
                OpResult::Acknowledged,
            );
        }
        let dir = temp_dir("legend");
        let path = dir.join("run.svg");
        let phases = [
            PhaseMark::new("copying", 5.0, 20.0),
            PhaseMark::new("cutover", 26.5, 27.9),
            PhaseMark::new("ACCESS EXCLUSIVE held 40.0 ms", 27.86, 27.9),
        ];
        write_latency_chart(&path, "legend", &timeline, &phases).expect("written");
        let svg = std::fs::read_to_string(&path).expect("read");
        // The plotted lines (more than a legend sample's two points), and how far
        // right they reach.
        let mut plotted = 0;
        let mut data_right = 0.0_f64;
        for polyline in svg.split("<polyline").skip(1) {
            let (_, after) = polyline.split_once("points=\"").expect("points");
            let points = after.split('"').next().expect("points end");
            let xs: Vec<f64> = points
                .split_whitespace()
                .map(|p| p.split(',').next().and_then(|x| x.parse().ok()).expect("x"))
                .collect();
            if xs.len() > 2 {
                plotted += 1;
                data_right = xs.iter().copied().fold(data_right, f64::max);
            }
        }
        assert!(plotted >= 3, "the p50, p99 and max lines are plotted");
        for label in [
            "copying (",
            "cutover (",
            "ACCESS EXCLUSIVE held",
            "p99",
            "max",
            "acknowledged",
        ] {
            let xs = text_x(&svg, label);
            assert!(!xs.is_empty(), "{label} is not in the legend");
            assert!(
                xs.iter().all(|x| *x > data_right),
                "{label} at {xs:?}, over the data (which reaches {data_right})"
            );
        }
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn a_backlog_chart_is_written_and_an_empty_series_is_fine() {
        let dir = temp_dir("backlog");
        let path = dir.join("backlog.svg");
        let lines = [
            BacklogLine {
                label: "400 writes/s".to_owned(),
                samples: (0..30).map(|i| (i as f64, (i % 5) * 40)).collect(),
            },
            BacklogLine {
                label: "empty".to_owned(),
                samples: Vec::new(),
            },
        ];
        write_backlog_chart(
            &path,
            "backlog",
            &lines,
            &[PhaseMark::new("copying", 1.0, 20.0)],
        )
        .expect("written");
        let svg = std::fs::read_to_string(&path).expect("read");
        assert!(svg.contains("400 writes/s") && svg.contains("copying"));
        let empty = dir.join("empty.svg");
        write_latency_chart_from_series(&empty, "nothing", &[], &[]).expect("written");
        assert!(std::fs::read_to_string(&empty)
            .expect("read")
            .contains("</svg>"));
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn segments_break_at_seconds_without_writes_and_labels_are_short() {
        let point = |second, p50_us| SecondPoint {
            second,
            writes: 1,
            acknowledged: 1,
            failed: 0,
            missed_slots: 0,
            p50_us,
            p99_us: p50_us,
            max_us: p50_us,
        };
        let series = [point(0, 1000), point(1, 0), point(2, 2000), point(3, 3000)];
        let parts = segments(&series, |p| p.p50_us as f64);
        assert_eq!(
            parts,
            vec![vec![(0.5, 1000.0)], vec![(2.5, 2000.0), (3.5, 3000.0)]]
        );
        assert_eq!(format_ms(0.1), "0.1");
        assert_eq!(format_ms(20.0), "20");
        assert_eq!(format_ms(1500.0), "1.5 s");
    }
}
