//! The nearest-rank percentile the benchmarks report (p50, p90, p99 of their samples).

/// The `p`-th percentile (nearest rank) of `sorted`, which is in ascending order; `None` when
/// it is empty.
pub(crate) fn nearest_rank<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len().max(1)) - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_are_the_nearest_at_or_above() {
        let v: Vec<u32> = (1..=100).collect();
        let cases = [(0.0, 1), (50.0, 50), (90.0, 90), (99.0, 99), (100.0, 100)];
        for (p, want) in cases {
            assert_eq!(nearest_rank(&v, p), Some(want), "p{p}");
        }
        assert_eq!(nearest_rank(&[1, 4, 7], 99.0), Some(7));
        assert_eq!(nearest_rank(&[1, 4, 7], 50.0), Some(4));
        assert_eq!(nearest_rank::<u32>(&[], 50.0), None);
    }
}
