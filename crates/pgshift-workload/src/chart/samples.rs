//! Sampled series over seconds of a load run: the change-log backlog (entries
//! waiting for the applier) and a replica's replay lag (bytes of WAL behind), with
//! the run's phases as bands and, for the replay lag, the throttle's decisions
//! shaded as on the latency chart.

use std::io;
use std::path::Path;

use plotters::prelude::*;

use super::{
    chart_error, draw_legend, draw_phase_bands, draw_throttle_spans, format_seconds,
    with_legend_strip, x_extent, BacklogLine, Glyph, PhaseMark, ThrottleMark, LEGEND_TOP, WIDTH,
};

const HEIGHT: u32 = 420;

/// What the y axis counts.
#[derive(Clone, Copy)]
enum Unit {
    /// Change-log entries.
    Entries,
    /// Bytes (labelled in KiB/MiB).
    Bytes,
}

/// Draws change-log backlogs (entries over seconds) into an SVG file at
/// `path`, with `phases` (of the first line's run) marked.
pub fn write_backlog_chart(
    path: &Path,
    title: &str,
    lines: &[BacklogLine],
    phases: &[PhaseMark],
) -> io::Result<()> {
    write_samples_chart(path, title, Unit::Entries, lines, phases, &[])
}

/// Draws a replica's replay lag (bytes of WAL behind over seconds) into an SVG file
/// at `path`, with `phases` marked (the cutover's band is the swap) and the
/// throttle's decisions shaded.
pub fn write_lag_chart(
    path: &Path,
    title: &str,
    lines: &[BacklogLine],
    phases: &[PhaseMark],
    throttle: &[ThrottleMark],
) -> io::Result<()> {
    write_samples_chart(path, title, Unit::Bytes, lines, phases, throttle)
}

fn write_samples_chart(
    path: &Path,
    title: &str,
    unit: Unit,
    lines: &[BacklogLine],
    phases: &[PhaseMark],
    throttle: &[ThrottleMark],
) -> io::Result<()> {
    let root = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(chart_error)?;
    let root = root
        .titled(title, ("sans-serif", 20).into_font())
        .map_err(chart_error)?;
    let x_max = lines
        .iter()
        .flat_map(|l| l.samples.iter().map(|s| s.0))
        .fold(x_extent(0.0, phases), f64::max);
    // From a little before the first phase or sample: the load before a
    // change has no backlog to show.
    let x_min = lines
        .iter()
        .flat_map(|l| l.samples.iter().map(|s| s.0))
        .chain(phases.iter().map(|p| p.start_s))
        .fold(f64::INFINITY, f64::min);
    let x_min = if x_min.is_finite() {
        (x_min - 2.0).max(0.0).floor().min(x_max - 1.0).max(0.0)
    } else {
        0.0
    };
    let y_max = lines
        .iter()
        .flat_map(|l| l.samples.iter().map(|s| s.1 as f64))
        .fold(10.0, f64::max)
        * 1.2;
    let (plot, legend_strip) = with_legend_strip(&root);
    let mut chart = ChartBuilder::on(&plot)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(x_min..x_max, 0.0..y_max)
        .map_err(chart_error)?;
    let y_desc = match unit {
        Unit::Entries => "change-log entries waiting",
        Unit::Bytes => "replay lag (WAL behind)",
    };
    chart
        .configure_mesh()
        .x_desc("seconds since the load started")
        .y_desc(y_desc)
        .x_label_formatter(&|v| format_seconds(*v, x_max - x_min))
        .y_label_formatter(&|v| match unit {
            Unit::Entries => format!("{v:.0}"),
            Unit::Bytes => format_bytes(*v),
        })
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(chart_error)?;
    let mut legend = draw_phase_bands(&mut chart, phases, 0.0, y_max)?;
    legend.extend(draw_throttle_spans(
        &mut chart,
        throttle,
        0.0,
        y_max,
        y_max * 5.0 / 6.0,
    )?);
    let colours = [
        RGBColor(30, 90, 200),
        RGBColor(200, 30, 30),
        RGBColor(40, 150, 60),
    ];
    for (i, line) in lines.iter().enumerate() {
        let colour = colours[i % colours.len()];
        let points: Vec<(f64, f64)> = line.samples.iter().map(|(t, b)| (*t, *b as f64)).collect();
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(2)))
            .map_err(chart_error)?;
        legend.push((line.label.clone(), Glyph::Line(colour)));
    }
    draw_legend(&legend_strip, &legend, LEGEND_TOP)?;
    root.present().map_err(chart_error)
}

/// A bytes axis label: `512 B`, `64 KiB`, `1.5 MiB` (P8's tables say lags so too).
pub fn format_bytes(v: f64) -> String {
    const KIB: f64 = 1024.0;
    if v >= KIB * KIB {
        format!("{:.1} MiB", v / (KIB * KIB))
    } else if v >= KIB {
        format!("{:.0} KiB", v / KIB)
    } else {
        format!("{v:.0} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lag_chart_shades_the_throttle_and_labels_bytes() {
        let dir = std::env::temp_dir().join(format!("pgshift-workload-lag-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("lag.svg");
        let lines = [BacklogLine {
            label: "bytes behind".to_owned(),
            samples: (0..30).map(|i| (i as f64, i * 300_000)).collect(),
        }];
        write_lag_chart(
            &path,
            "replay lag",
            &lines,
            &[PhaseMark::new("cutover", 20.0, 20.5)],
            &[ThrottleMark {
                label: "paused: replica lag".to_owned(),
                paused: true,
                start_s: 5.0,
                end_s: 9.0,
            }],
        )
        .expect("written");
        let svg = std::fs::read_to_string(&path).expect("read");
        assert!(svg.contains("paused: replica lag (1×, 4.0 s)"), "{svg}");
        assert!(svg.contains("cutover") && svg.contains("MiB"));
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn bytes_are_labelled_in_their_unit() {
        assert_eq!(format_bytes(512.0), "512 B");
        assert_eq!(format_bytes(65_536.0), "64 KiB");
        assert_eq!(format_bytes(1_572_864.0), "1.5 MiB");
    }
}
