//! Summaries of repeated measurements: median with min and max, and percentiles.

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
}
