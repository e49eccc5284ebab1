//! Summaries of repeated measurements: median with min and max, medians with 95% bootstrap
//! intervals, and percentiles.

use kevent_test_rng::Rng;

use crate::json::Json;

/// The median, minimum and maximum of a set of samples (one sample per timed block).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// The median (the mean of the two middle samples for an even count).
    pub median: f64,
    /// The smallest sample.
    pub min: f64,
    /// The largest sample.
    pub max: f64,
    /// How many samples.
    pub n: usize,
}

impl Summary {
    /// Summarises `samples`; `None` when there are none.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        let mut v = samples.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Summary {
            median,
            min: v[0],
            max: v[n - 1],
            n,
        })
    }

    /// `median (min–max)` with `prec` decimals.
    pub fn cell(&self, prec: usize) -> String {
        format!(
            "{:.p$} ({:.p$}–{:.p$})",
            self.median,
            self.min,
            self.max,
            p = prec
        )
    }

    /// `{"median": .., "min": .., "max": .., "n": ..}`.
    pub fn json(&self) -> Json {
        Json::obj([
            ("median", Json::from(self.median)),
            ("min", Json::from(self.min)),
            ("max", Json::from(self.max)),
            ("n", Json::from(self.n)),
        ])
    }
}

/// Resamples drawn for a bootstrap interval.
pub const BOOTSTRAP_RESAMPLES: usize = 4000;

/// The median of a set of samples with its 95% percentile-bootstrap interval: the 2.5th and
/// 97.5th percentiles of the medians of [`BOOTSTRAP_RESAMPLES`] resamples (with replacement,
/// same size, fixed seed so that a report is reproducible from its samples).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    /// The median of the samples.
    pub median: f64,
    /// Lower end of the 95% interval.
    pub lo: f64,
    /// Upper end of the 95% interval.
    pub hi: f64,
    /// How many samples.
    pub n: usize,
}

fn median_sorted(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

impl Interval {
    /// The median of `samples` and its bootstrap interval; `None` when there are none.
    pub fn of(samples: &[f64]) -> Option<Interval> {
        if samples.is_empty() {
            return None;
        }
        let mut v = samples.to_vec();
        v.sort_by(f64::total_cmp);
        let median = median_sorted(&v);
        let mut rng = Rng::new(0x6b65_7665_6e74_2d62);
        let mut resample = vec![0.0; v.len()];
        let mut medians: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
            .map(|_| {
                for x in resample.iter_mut() {
                    *x = v[rng.index(v.len())];
                }
                resample.sort_by(f64::total_cmp);
                median_sorted(&resample)
            })
            .collect();
        medians.sort_by(f64::total_cmp);
        let lo = medians[(BOOTSTRAP_RESAMPLES as f64 * 0.025) as usize];
        let hi = medians[(BOOTSTRAP_RESAMPLES as f64 * 0.975).ceil() as usize - 1];
        Some(Interval {
            median,
            lo,
            hi,
            n: v.len(),
        })
    }

    /// Fewer samples than this give no interval worth the name: the bootstrap of one or two
    /// values is those values.
    pub const MIN_SAMPLES: usize = 3;

    /// Whether there are enough samples for an interval.
    pub fn is_interval(&self) -> bool {
        self.n >= Interval::MIN_SAMPLES
    }

    /// Whether the interval contains `x` (for a ratio: 1.0, no measurable difference).
    /// Always true with too few samples: nothing is established.
    pub fn contains(&self, x: f64) -> bool {
        !self.is_interval() || (self.lo <= x && x <= self.hi)
    }

    /// `median [lo–hi]` with `prec` decimals (`median (n runs, no interval)` with too few).
    pub fn cell(&self, prec: usize) -> String {
        if !self.is_interval() {
            let runs = if self.n == 1 { "1 run" } else { "2 runs" };
            return format!("{:.p$} ({runs}, no interval)", self.median, p = prec);
        }
        format!(
            "{:.p$} [{:.p$}–{:.p$}]",
            self.median,
            self.lo,
            self.hi,
            p = prec
        )
    }

    /// A ratio cell: `**median** [lo–hi]` when the interval excludes 1.0, otherwise
    /// `median [lo–hi] ≈` (≈: no measurable difference).
    pub fn ratio_cell(&self) -> String {
        if !self.is_interval() {
            self.cell(2)
        } else if self.contains(1.0) {
            format!("{} ≈", self.cell(2))
        } else {
            format!("**{:.2}** [{:.2}–{:.2}]", self.median, self.lo, self.hi)
        }
    }

    /// `no measurable difference` when the interval contains 1.0, else `faster`/`slower`
    /// style words chosen by the caller: `above` when the whole interval is above 1.
    pub fn verdict(&self, above: &str, below: &str) -> String {
        if !self.is_interval() {
            "too few runs to say".to_owned()
        } else if self.contains(1.0) {
            "no measurable difference".to_owned()
        } else if self.lo > 1.0 {
            above.to_owned()
        } else {
            below.to_owned()
        }
    }

    /// `{"median": .., "ci95": [lo, hi], "n": ..}`.
    pub fn json(&self) -> Json {
        Json::obj([
            ("median", Json::from(self.median)),
            (
                "ci95",
                Json::arr([Json::from(self.lo), Json::from(self.hi)]),
            ),
            ("n", Json::from(self.n)),
        ])
    }
}

/// The verdict on a target `value ≤ target` over a set of intervals (e.g. every cell of a
/// table): `met` when every interval lies at or below it, `missed` when some interval lies
/// wholly above it, `not established` (with the noise named) otherwise.
pub fn judge_at_most(intervals: &[Interval], target: f64) -> &'static str {
    if intervals.is_empty() {
        "not measured"
    } else if intervals.iter().any(|i| !i.is_interval()) {
        "not established (too few runs)"
    } else if intervals.iter().all(|i| i.hi <= target) {
        "met"
    } else if intervals.iter().any(|i| i.lo > target) {
        "missed"
    } else {
        "not established (an interval spans the target)"
    }
}

/// Explains the ≈ mark of [`Interval::ratio_cell`], for the text under a table.
pub const RATIO_LEGEND: &str = "Ratios: median of the paired ratios with its 95% bootstrap \
    interval in brackets; **bold** when the interval excludes 1.0, `≈` when it contains 1.0: \
    no measurable difference.";

/// The `q`-quantile (0 ≤ q ≤ 1) of sorted `v` by the nearest-rank rule; `None` if empty.
pub fn percentile_sorted<T: Copy>(v: &[T], q: f64) -> Option<T> {
    if v.is_empty() {
        return None;
    }
    let rank = (q * v.len() as f64).ceil() as usize;
    Some(v[rank.clamp(1, v.len()) - 1])
}

/// A ratio `a / b` as a Markdown cell (`–` when either side is missing).
pub fn ratio_cell(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "–".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_min_max() {
        let s = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        let s = Summary::of(&[4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!(s.median, 2.5);
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(s.cell(1), "2.5 (1.0–4.0)");
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile_sorted(&v, 0.5), Some(50));
        assert_eq!(percentile_sorted(&v, 0.99), Some(99));
        assert_eq!(percentile_sorted(&v, 1.0), Some(100));
        assert_eq!(percentile_sorted(&v, 0.0), Some(1));
        assert_eq!(percentile_sorted::<u32>(&[], 0.5), None);
        assert_eq!(ratio_cell(Some(3.0), Some(2.0)), "1.50");
        assert_eq!(ratio_cell(None, Some(2.0)), "–");
    }

    #[test]
    fn bootstrap_intervals() {
        // One or two samples: no interval, nothing established.
        let one = Interval::of(&[0.7]).unwrap();
        assert!(!one.is_interval() && one.contains(1.0));
        assert_eq!(one.ratio_cell(), "0.70 (1 run, no interval)");
        assert_eq!(one.verdict("faster", "slower"), "too few runs to say");
        assert!(judge_at_most(&[one], 1.1).starts_with("not established"));
        // Identical samples: the interval is the point.
        let i = Interval::of(&[1.2; 7]).unwrap();
        assert_eq!((i.median, i.lo, i.hi, i.n), (1.2, 1.2, 1.2, 7));
        assert!(!i.contains(1.0));
        assert_eq!(i.verdict("faster", "slower"), "faster");
        // Clearly above 1, with noise: the interval excludes 1 and holds the median.
        let above: Vec<f64> = (0..10).map(|k| 1.3 + 0.01 * f64::from(k % 5)).collect();
        let i = Interval::of(&above).unwrap();
        assert!(i.lo > 1.0 && i.lo <= i.median && i.median <= i.hi, "{i:?}");
        assert!(i.ratio_cell().starts_with("**1.3"));
        // Straddling 1: no measurable difference.
        let mixed = [0.9, 1.1, 0.95, 1.05, 1.0, 0.97, 1.03, 0.92, 1.08, 1.01];
        let i = Interval::of(&mixed).unwrap();
        assert!(i.contains(1.0), "{i:?}");
        assert!(i.ratio_cell().ends_with('≈'));
        assert_eq!(i.verdict("faster", "slower"), "no measurable difference");
        // Below 1.
        let i = Interval::of(&[0.5, 0.52, 0.49, 0.51]).unwrap();
        assert_eq!(i.verdict("faster", "slower"), "slower");
        // Deterministic, and a wider spread gives a wider interval.
        assert_eq!(Interval::of(&mixed), Interval::of(&mixed));
        let wide: Vec<f64> = mixed.iter().map(|x| 1.0 + 3.0 * (x - 1.0)).collect();
        let w = Interval::of(&wide).unwrap();
        assert!(w.hi - w.lo > i.hi - i.lo);
        assert_eq!(Interval::of(&[]), None);
        assert_eq!(
            Interval::of(&[2.0, 2.0, 2.0]).unwrap().cell(1),
            "2.0 [2.0–2.0]"
        );
        let at = |lo, hi| Interval {
            median: (lo + hi) / 2.0,
            lo,
            hi,
            n: 5,
        };
        assert_eq!(judge_at_most(&[at(1.0, 1.05), at(0.9, 1.1)], 1.1), "met");
        assert_eq!(
            judge_at_most(&[at(1.0, 1.05), at(1.12, 1.3)], 1.1),
            "missed"
        );
        assert!(judge_at_most(&[at(1.0, 1.05), at(1.0, 1.3)], 1.1).starts_with("not established"));
        assert_eq!(judge_at_most(&[], 1.1), "not measured");
    }
}
