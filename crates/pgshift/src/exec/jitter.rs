//! A small deterministic random source for backoff jitter (xorshift64*), seeded by the
//! caller: from the clock in production, fixed in tests.

/// Jitter in `[0.5, 1.0)`.
#[derive(Clone, Debug)]
pub struct Jitter {
    state: u64,
}

impl Jitter {
    /// A source seeded with `seed` (0 is replaced by a fixed non-zero value).
    pub fn seeded(seed: u64) -> Self {
        Jitter {
            state: if seed == 0 {
                0x9E37_79B9_7F4A_7C15
            } else {
                seed
            },
        }
    }

    /// A source seeded from the clock and the process id.
    pub fn from_clock() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Jitter::seeded(nanos ^ (u64::from(std::process::id()) << 32))
    }

    /// The next value in `[0.5, 1.0)`.
    pub fn next_unit(&mut self) -> f64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        let value = self.state.wrapping_mul(0x2545_F491_4F6C_DD1D);
        0.5 + (value >> 11) as f64 / (1u64 << 53) as f64 / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::Jitter;

    #[test]
    fn values_stay_in_range_and_vary() {
        let mut jitter = Jitter::seeded(42);
        let values: Vec<f64> = (0..1000).map(|_| jitter.next_unit()).collect();
        assert!(values.iter().all(|v| (0.5..1.0).contains(v)));
        let distinct: std::collections::BTreeSet<u64> =
            values.iter().map(|v| (v * 1e6) as u64).collect();
        assert!(distinct.len() > 900);
    }
}
