//! A small SVG chart writer: line charts (log or linear axes) for the poller, grouped bar
//! charts with whiskers (95% intervals) for the HTTP runs, and interval ("forest") charts of
//! ratios against a reference line at 1.0. Plain SVG 1.1 text, no dependency.

use std::fmt::Write as _;

const W: f64 = 860.0;
const H: f64 = 420.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 310.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 56.0;
const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// One line of a [`LineChart`]: `(x, y)` points in x order.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// The points.
    pub points: Vec<(f64, f64)>,
}

/// A line chart with one line per series.
#[derive(Clone, Debug)]
pub struct LineChart {
    /// Title above the plot.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Logarithmic x axis.
    pub x_log: bool,
    /// Logarithmic y axis.
    pub y_log: bool,
    /// The lines.
    pub series: Vec<Series>,
}

/// A grouped bar chart: one group per category, one bar per series, each bar a median with
/// an optional min–max whisker.
#[derive(Clone, Debug)]
pub struct BarChart {
    /// Title above the plot.
    pub title: String,
    /// Y axis label.
    pub y_label: String,
    /// Category labels (x axis).
    pub groups: Vec<String>,
    /// `(legend, one bar per group)`; `None` for a missing bar.
    pub series: Vec<(String, Vec<Option<Bar>>)>,
}

/// One bar: `(median, low, high)` (the whisker spans low–high).
pub type Bar = (f64, f64, f64);

/// Intervals of ratios, one row each, against a vertical line at 1.0.
#[derive(Clone, Debug)]
pub struct ForestChart {
    /// Title above the plot.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// `(label, series index for the colour, (median, low, high))`.
    pub rows: Vec<(String, usize, Bar)>,
}

/// Maps data values to pixels along one axis.
struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
}

impl Axis {
    fn new(values: impl Iterator<Item = f64>, log: bool, zero: bool) -> Axis {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if !lo.is_finite() {
            (lo, hi) = (1.0, 10.0);
        }
        if log {
            lo = 10f64.powf(lo.log10().floor());
            hi = 10f64.powf(hi.log10().ceil().max(lo.log10() + 1.0));
        } else {
            if zero {
                lo = lo.min(0.0);
            }
            let step = nice_step((hi - lo).max(f64::MIN_POSITIVE) / 5.0);
            lo = (lo / step).floor() * step;
            hi = ((hi / step).ceil() * step).max(lo + step);
        }
        Axis { lo, hi, log }
    }

    /// Position in 0..=1.
    fn frac(&self, v: f64) -> f64 {
        if self.log {
            (v.max(self.lo).log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }

    fn ticks(&self) -> Vec<f64> {
        if self.log {
            let (a, b) = (
                self.lo.log10().round() as i32,
                self.hi.log10().round() as i32,
            );
            (a..=b).map(|e| 10f64.powi(e)).collect()
        } else {
            let step = nice_step((self.hi - self.lo) / 5.0);
            let n = ((self.hi - self.lo) / step).round() as usize;
            (0..=n).map(|i| self.lo + step * i as f64).collect()
        }
    }
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * p)
}

/// A tick label: integers without decimals, large values with k/M suffixes.
fn label(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 && (v / 1e6).fract() == 0.0 {
        format!("{}M", v / 1e6)
    } else if a >= 1e3 && (v / 1e3).fract() == 0.0 {
        format!("{}k", v / 1e3)
    } else if v.fract() == 0.0 {
        format!("{v}")
    } else {
        format!("{v:.2}")
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The frame shared by both chart kinds: background, title, axis labels, y grid.
fn frame(out: &mut String, title: &str, x_label: &str, y_label: &str, y: &Axis) {
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" \
         viewBox=\"0 0 {W} {H}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"{W}\" height=\"{H}\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n\
         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n\
         <text transform=\"translate(18,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
        W / 2.0,
        esc(title),
        LEFT + (W - LEFT - RIGHT) / 2.0,
        H - 12.0,
        esc(x_label),
        TOP + (H - TOP - BOTTOM) / 2.0,
        esc(y_label),
    );
    for t in y.ticks() {
        let py = py(y, t);
        let _ = writeln!(
            out,
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{py:.1}\" y2=\"{py:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            W - RIGHT,
            LEFT - 6.0,
            py + 4.0,
            label(t)
        );
    }
    let _ = writeln!(
        out,
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>",
        W - LEFT - RIGHT,
        H - TOP - BOTTOM
    );
}

fn py(y: &Axis, v: f64) -> f64 {
    H - BOTTOM - y.frac(v) * (H - TOP - BOTTOM)
}

fn legend(out: &mut String, i: usize, name: &str) {
    let (x, y) = (W - RIGHT + 14.0, TOP + 10.0 + 20.0 * i as f64);
    let _ = writeln!(
        out,
        "<rect x=\"{x}\" y=\"{}\" width=\"14\" height=\"10\" fill=\"{}\"/>\
         <text x=\"{}\" y=\"{}\">{}</text>",
        y - 9.0,
        COLOURS[i % COLOURS.len()],
        x + 20.0,
        y,
        esc(name)
    );
}

impl LineChart {
    /// The chart as SVG text.
    pub fn render(&self) -> String {
        let pts = || self.series.iter().flat_map(|s| s.points.iter());
        let x = Axis::new(pts().map(|p| p.0), self.x_log, false);
        let y = Axis::new(pts().map(|p| p.1), self.y_log, true);
        let px = |v: f64| LEFT + x.frac(v) * (W - LEFT - RIGHT);
        let mut out = String::new();
        frame(&mut out, &self.title, &self.x_label, &self.y_label, &y);
        for t in x.ticks() {
            let _ = writeln!(
                out,
                "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                px(t),
                H - BOTTOM + 16.0,
                label(t)
            );
        }
        for (i, s) in self.series.iter().enumerate() {
            let c = COLOURS[i % COLOURS.len()];
            let path: Vec<String> = s
                .points
                .iter()
                .map(|&(a, b)| format!("{:.1},{:.1}", px(a), py(&y, b)))
                .collect();
            let _ = writeln!(
                out,
                "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" points=\"{}\"/>",
                path.join(" ")
            );
            for p in &path {
                let (a, b) = p.split_once(',').unwrap_or(("0", "0"));
                let _ = writeln!(out, "<circle cx=\"{a}\" cy=\"{b}\" r=\"3\" fill=\"{c}\"/>");
            }
            legend(&mut out, i, &s.name);
        }
        out.push_str("</svg>\n");
        out
    }
}

impl BarChart {
    /// The chart as SVG text.
    pub fn render(&self) -> String {
        let vals = self
            .series
            .iter()
            .flat_map(|s| s.1.iter().flatten().flat_map(|v| [v.0, v.1, v.2]));
        let y = Axis::new(vals, false, true);
        let mut out = String::new();
        frame(&mut out, &self.title, "", &self.y_label, &y);
        let gw = (W - LEFT - RIGHT) / self.groups.len().max(1) as f64;
        let bw = gw * 0.8 / self.series.len().max(1) as f64;
        for (g, name) in self.groups.iter().enumerate() {
            let gx = LEFT + gw * g as f64;
            let _ = writeln!(
                out,
                "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                gx + gw / 2.0,
                H - BOTTOM + 16.0,
                esc(name)
            );
            for (i, (_, bars)) in self.series.iter().enumerate() {
                let Some(Some((med, lo, hi))) = bars.get(g) else {
                    continue;
                };
                let c = COLOURS[i % COLOURS.len()];
                let x0 = gx + gw * 0.1 + bw * i as f64;
                let (top, base) = (py(&y, *med), py(&y, y.lo.max(0.0)));
                let _ = writeln!(
                    out,
                    "<rect x=\"{x0:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{c}\"/>",
                    bw * 0.9,
                    (base - top).max(0.0)
                );
                let cx = x0 + bw * 0.45;
                let _ = writeln!(
                    out,
                    "<line x1=\"{cx:.1}\" x2=\"{cx:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#000\"/>",
                    py(&y, *lo),
                    py(&y, *hi)
                );
            }
        }
        for (i, (name, _)) in self.series.iter().enumerate() {
            legend(&mut out, i, name);
        }
        out.push_str("</svg>\n");
        out
    }
}

impl ForestChart {
    /// The chart as SVG text.
    pub fn render(&self) -> String {
        const ROW: f64 = 22.0;
        const LABEL: f64 = 330.0;
        let h = TOP + BOTTOM + ROW * self.rows.len().max(1) as f64;
        let vals = self
            .rows
            .iter()
            .flat_map(|r| [r.2.0, r.2.1, r.2.2])
            .chain([1.0]);
        let x = Axis::new(vals, false, false);
        let (x0, x1) = (LABEL, W - 30.0);
        let px = |v: f64| x0 + x.frac(v) * (x1 - x0);
        let mut out = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{h}\" \
             viewBox=\"0 0 {W} {h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
             <rect width=\"{W}\" height=\"{h}\" fill=\"white\"/>\n\
             <text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n\
             <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
            W / 2.0,
            esc(&self.title),
            (x0 + x1) / 2.0,
            h - 12.0,
            esc(&self.x_label),
        );
        for t in x.ticks() {
            let _ = writeln!(
                out,
                "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{TOP}\" y2=\"{1}\" stroke=\"#ddd\"/>\
                 <text x=\"{0:.1}\" y=\"{2}\" text-anchor=\"middle\">{3}</text>",
                px(t),
                h - BOTTOM,
                h - BOTTOM + 16.0,
                label(t)
            );
        }
        let _ = writeln!(
            out,
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{TOP}\" y2=\"{1}\" stroke=\"#333\" \
             stroke-dasharray=\"4 3\"/>",
            px(1.0),
            h - BOTTOM
        );
        for (i, (name, series, (med, lo, hi))) in self.rows.iter().enumerate() {
            let y = TOP + ROW * (i as f64 + 0.5);
            let c = COLOURS[series % COLOURS.len()];
            let _ = writeln!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\
                 <line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"{c}\" \
                 stroke-width=\"3\"/><circle cx=\"{:.1}\" cy=\"{y:.1}\" r=\"4\" fill=\"{c}\"/>",
                x0 - 8.0,
                y + 4.0,
                esc(name),
                px(*lo),
                px(*hi),
                px(*med)
            );
        }
        out.push_str("</svg>\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_chart_is_svg_with_every_series() {
        let c = LineChart {
            title: "t <1>".into(),
            x_label: "N".into(),
            y_label: "µs".into(),
            x_log: true,
            y_log: true,
            series: vec![
                Series {
                    name: "epoll".into(),
                    points: vec![(100.0, 2.0), (10000.0, 2.1)],
                },
                Series {
                    name: "poll".into(),
                    points: vec![(100.0, 3.0), (10000.0, 300.0)],
                },
            ],
        };
        let s = c.render();
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert!(s.contains("t &lt;1&gt;"));
        assert_eq!(s.matches("<polyline").count(), 2);
        assert!(s.contains(">10k<") && s.contains(">100<"));
    }

    #[test]
    fn bar_chart_skips_missing_bars() {
        let c = BarChart {
            title: "http".into(),
            y_label: "req/s".into(),
            groups: vec!["a".into(), "b".into()],
            series: vec![
                ("epoll".into(), vec![Some((10.0, 9.0, 11.0)), None]),
                (
                    "kevent".into(),
                    vec![Some((12.0, 11.0, 13.0)), Some((5.0, 4.0, 6.0))],
                ),
            ],
        };
        let s = c.render();
        assert_eq!(s.matches("fill=\"#1f77b4\"/>").count(), 2); // one bar + one legend box
        assert_eq!(s.matches("fill=\"#d62728\"/>").count(), 3);
    }

    #[test]
    fn forest_chart_has_a_row_per_interval_and_the_line_at_one() {
        let c = ForestChart {
            title: "ratios".into(),
            x_label: "÷ epoll".into(),
            rows: vec![
                ("a <1>".into(), 0, (1.02, 0.98, 1.05)),
                ("b".into(), 1, (0.8, 0.7, 0.9)),
            ],
        };
        let s = c.render();
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert_eq!(s.matches("<circle").count(), 2);
        assert!(s.contains("a &lt;1&gt;"));
        assert!(s.contains("stroke-dasharray"));
    }

    #[test]
    fn nice_steps_and_labels() {
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(0.15), 0.2);
        assert_eq!(label(30000.0), "30k");
        assert_eq!(label(2_000_000.0), "2M");
        assert_eq!(label(0.5), "0.50");
    }
}
