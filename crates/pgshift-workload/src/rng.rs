//! A small deterministic random number generator (SplitMix64) for the
//! workload's choices: which operation, which kind, which channel, which row.
//! Statistical quality is ample for that, a seed reproduces a run's choices,
//! and it needs no dependency.

/// SplitMix64 (Steele, Lea and Flood, 2014).
#[derive(Clone, Debug)]
pub(crate) struct Rng {
    state: u64,
}

impl Rng {
    /// A generator for `seed`, decorrelated per `stream` (e.g. a writer index).
    pub fn new(seed: u64, stream: u64) -> Self {
        let mut rng = Rng {
            state: seed ^ stream.wrapping_mul(0xa076_1d64_78bd_642f),
        };
        rng.next_u64();
        rng
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (`0` when `bound` is 0), by Lemire's
    /// multiply-shift (the bias is below 2^-32 for the bounds used here).
    pub fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }

    /// An index into a slice of `len` elements (`0` when empty).
    pub fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    /// Picks an entry of `weights` with probability proportional to its
    /// weight; `None` when all weights are zero.
    pub fn weighted(&mut self, weights: &[u32]) -> Option<usize> {
        let total: u64 = weights.iter().map(|w| u64::from(*w)).sum();
        if total == 0 {
            return None;
        }
        let mut pick = self.below(total);
        for (i, weight) in weights.iter().enumerate() {
            let weight = u64::from(*weight);
            if pick < weight {
                return Some(i);
            }
            pick -= weight;
        }
        None
    }

    /// 32 random bytes.
    pub fn bytes32(&mut self) -> [u8; 32] {
        let mut out = [0_u8; 32];
        for chunk in out.chunks_mut(8) {
            chunk.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_and_stream_repeat_and_streams_differ() {
        let mut a = Rng::new(42, 1);
        let mut b = Rng::new(42, 1);
        let mut c = Rng::new(42, 2);
        let xs: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..4).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..4).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
    }

    #[test]
    fn weighted_never_picks_a_zero_weight_and_follows_the_weights() {
        let mut rng = Rng::new(7, 0);
        let mut counts = [0_u32; 3];
        for _ in 0..10_000 {
            let i = rng.weighted(&[1, 0, 3]).expect("some weight");
            counts[i] += 1;
        }
        assert_eq!(counts[1], 0);
        assert!(counts[2] > 2 * counts[0], "{counts:?}");
        assert_eq!(rng.weighted(&[0, 0]), None);
    }

    #[test]
    fn below_stays_in_range() {
        let mut rng = Rng::new(1, 1);
        assert!((0..1000).all(|_| rng.below(5) < 5));
        assert_eq!(rng.below(0), 0);
    }
}
