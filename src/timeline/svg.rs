//! Draws a timeline as a self-contained SVG Gantt chart: one row per track, one bar per span
//! colored by stage, a legend and a time axis. Hovering a bar shows its details.

use std::fmt::Write as _;
use std::path::Path;

use super::chrome::{tracks_in_display_order, Process};
use super::recorder::{Span, Timeline};
use crate::error::{Error, Result};
use crate::stage::Stage;

/// Width of the plot area, in pixels.
const PLOT_WIDTH: f64 = 1000.0;
const ROW_HEIGHT: f64 = 22.0;
const BAR_HEIGHT: f64 = 16.0;
const FONT_SIZE: f64 = 12.0;
/// Approximate advance of one monospace character at `FONT_SIZE`.
const CHAR_WIDTH: f64 = 7.2;
const MARGIN: f64 = 10.0;
const TITLE_HEIGHT: f64 = 22.0;
const LEGEND_HEIGHT: f64 = 24.0;
const AXIS_HEIGHT: f64 = 30.0;
/// Roughly how many ticks the time axis gets.
const TARGET_TICKS: f64 = 10.0;

/// The timeline as an SVG document. Bars have class `bar`, legend swatches class `legend`.
pub fn to_svg(t: &Timeline) -> String {
    let tracks = tracks_in_display_order(t);
    let end_s = t.spans.iter().map(|s| s.end_s).filter(|e| e.is_finite()).fold(0.0, f64::max);
    // A positive extent keeps the scale finite for an empty or instantaneous timeline.
    let extent_s = if end_s > 0.0 { end_s } else { 1e-3 };
    let label_width = tracks.iter().map(|t| t.label().chars().count()).max().unwrap_or(0) as f64 * CHAR_WIDTH + 12.0;
    let plot_x = MARGIN + label_width;
    let rows_y = MARGIN + TITLE_HEIGHT + LEGEND_HEIGHT;
    let axis_y = rows_y + tracks.len() as f64 * ROW_HEIGHT;
    let width = plot_x + PLOT_WIDTH + 2.0 * MARGIN;
    let height = axis_y + AXIS_HEIGHT + MARGIN;
    let x_of = |s: f64| plot_x + (s.max(0.0) / extent_s) * PLOT_WIDTH;

    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="monospace" font-size="{FONT_SIZE}" style="background:#fff">"#
    );
    let _ = writeln!(
        out,
        r#"<text x="{MARGIN}" y="{:.1}" font-weight="bold">snarkpipe timeline: {} spans on {} tracks, {}</text>"#,
        MARGIN + 14.0,
        t.spans.len(),
        tracks.len(),
        TimeUnit::for_extent(end_s).format(end_s, 3),
    );

    // Legend: the stages that occur, in pipeline order.
    let mut legend_x = MARGIN;
    let legend_y = MARGIN + TITLE_HEIGHT;
    for stage in Stage::ALL.into_iter().filter(|s| t.spans.iter().any(|span| span.stage == *s)) {
        let _ = writeln!(
            out,
            r#"<rect class="legend" x="{legend_x:.1}" y="{legend_y:.1}" width="12" height="12" fill="{}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            Stage::colour(stage),
            legend_x + 16.0,
            legend_y + 10.5,
            stage.name(),
        );
        legend_x += 16.0 + stage.name().len() as f64 * CHAR_WIDTH + 14.0;
    }

    // Grid lines and tick labels.
    let unit = TimeUnit::for_extent(extent_s);
    let step = tick_step(extent_s);
    let decimals = unit.decimals_for(step);
    let mut ticks = 0usize;
    while (ticks as f64) * step <= extent_s * (1.0 + 1e-9) && ticks <= 100 {
        let s = ticks as f64 * step;
        let x = x_of(s);
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{rows_y:.1}" x2="{x:.1}" y2="{:.1}" stroke="#e0e0e0"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            axis_y + 4.0,
            axis_y + 18.0,
            unit.format(s, decimals),
        );
        ticks += 1;
    }
    let _ = writeln!(
        out,
        r##"<line x1="{plot_x:.1}" y1="{axis_y:.1}" x2="{:.1}" y2="{axis_y:.1}" stroke="#616161"/>"##,
        plot_x + PLOT_WIDTH
    );

    // One row per track: label, then its bars; a rule between the host and each device.
    for (row, track) in tracks.iter().enumerate() {
        let y = rows_y + row as f64 * ROW_HEIGHT;
        if row > 0 && Process::of(tracks[row - 1]) != Process::of(track) {
            let _ = writeln!(
                out,
                r##"<line x1="{MARGIN}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#bdbdbd" stroke-dasharray="4 3"/>"##,
                plot_x + PLOT_WIDTH
            );
        }
        let _ = writeln!(
            out,
            r#"<text x="{MARGIN}" y="{:.1}">{}</text>"#,
            y + ROW_HEIGHT / 2.0 + FONT_SIZE / 2.0 - 2.0,
            escape(&track.label())
        );
        for span in t.spans.iter().filter(|s| &s.track == *track) {
            write_bar(&mut out, span, x_of(span.start_s), x_of(span.end_s), y, unit);
        }
    }
    out.push_str("</svg>\n");
    out
}

fn write_bar(out: &mut String, span: &Span, x0: f64, x1: f64, row_y: f64, unit: TimeUnit) {
    // Keep very short spans visible as a hairline.
    let w = (x1 - x0).max(0.5);
    let y = row_y + (ROW_HEIGHT - BAR_HEIGHT) / 2.0;
    let mut title = format!(
        "{} of partition {} on {}: {} to {} ({})",
        span.stage,
        span.partition,
        span.track.label(),
        unit.format(span.start_s, 3),
        unit.format(span.end_s, 3),
        unit.format(span.duration_s(), 3),
    );
    for (key, value) in &span.args {
        let _ = write!(title, "\n{key}: {value}");
    }
    let _ = writeln!(
        out,
        r##"<rect class="bar" x="{x0:.2}" y="{y:.1}" width="{w:.2}" height="{BAR_HEIGHT}" fill="{}" stroke="#fff" stroke-width="0.5"><title>{}</title></rect>"##,
        Stage::colour(span.stage),
        escape(&title)
    );
    let label = span.partition.to_string();
    if w >= label.len() as f64 * CHAR_WIDTH + 4.0 {
        let _ = writeln!(
            out,
            r##"<text x="{:.2}" y="{:.1}" text-anchor="middle" fill="#fff" pointer-events="none">{label}</text>"##,
            x0 + w / 2.0,
            y + BAR_HEIGHT / 2.0 + FONT_SIZE / 2.0 - 2.0,
        );
    }
}

/// A 1, 2 or 5 times a power of ten giving about [`TARGET_TICKS`] ticks over `extent_s`.
fn tick_step(extent_s: f64) -> f64 {
    let raw = extent_s / TARGET_TICKS;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * magnitude).find(|s| *s >= raw).unwrap_or(10.0 * magnitude);
    if step.is_finite() && step > 0.0 {
        step
    } else {
        1e-3
    }
}

/// The unit a chart spanning `extent_s` is labelled in: ms under a second, else s.
#[derive(Clone, Copy)]
struct TimeUnit {
    per_second: f64,
    name: &'static str,
}

impl TimeUnit {
    fn for_extent(extent_s: f64) -> TimeUnit {
        if extent_s < 1.0 {
            TimeUnit { per_second: 1e3, name: "ms" }
        } else {
            TimeUnit { per_second: 1.0, name: "s" }
        }
    }

    /// Just enough decimals for values `step_s` apart to read differently.
    fn decimals_for(self, step_s: f64) -> usize {
        let step = step_s * self.per_second;
        if step.is_finite() && step > 0.0 {
            (-step.log10().floor()).clamp(0.0, 6.0) as usize
        } else {
            0
        }
    }

    fn format(self, s: f64, decimals: usize) -> String {
        format!("{:.decimals$} {}", s * self.per_second, self.name)
    }
}

/// Escapes text for SVG element content and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Writes [`to_svg`] to `path`.
pub fn write_svg(t: &Timeline, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    std::fs::write(path, to_svg(t))
        .map_err(|e| Error::io(format!("writing the timeline chart to {}", path.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_numbers() {
        assert!((tick_step(0.010) - 0.001).abs() < 1e-12);
        assert!((tick_step(0.035) - 0.005).abs() < 1e-12);
        assert!((tick_step(2.5) - 0.5).abs() < 1e-12);
        let ms = TimeUnit::for_extent(0.01);
        assert_eq!(ms.format(0.002, ms.decimals_for(tick_step(0.01))), "2 ms");
        assert_eq!(ms.format(0.0025, 3), "2.500 ms");
        let s = TimeUnit::for_extent(12.0);
        assert_eq!(s.format(1.5, s.decimals_for(tick_step(2.5))), "1.5 s");
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(escape(r#"a<b & "c""#), "a&lt;b &amp; &quot;c&quot;");
    }
}
