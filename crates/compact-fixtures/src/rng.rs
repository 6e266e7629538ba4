//! The seeded generator behind every synthetic session (the benchmarks,
//! `compact demo`, the soak harness): the same seed replays the same
//! session, with no RNG crate. Not for anything that needs unpredictability.

/// xorshift64* with a multiplicative seed scramble: small, fast, and good
/// enough to draw workloads. Every seed, 0 included, gives a usable stream.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The generator for `seed`.
    pub fn new(seed: u64) -> Self {
        // xorshift needs a non-zero state; `| 1` also makes nearby seeds
        // start far apart after the multiply.
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (0 when `n == 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Uniform in `lo..=hi` (`lo` when `hi < lo`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo).saturating_add(1))
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() <= p
    }

    /// A uniformly chosen element of `xs`, which must not be empty.
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }

    /// Log-uniform size in `lo..=hi`: tiny outputs common, huge ones rare.
    pub fn log_size(&mut self, lo: u64, hi: u64) -> usize {
        let (a, b) = ((lo.max(1) as f64).ln(), (hi.max(2) as f64).ln());
        (a + (b - a) * self.unit()).exp() as usize
    }

    // Uniform in [0, 1), from the top 53 bits (the best ones of xorshift64*).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_replays_its_stream_and_seeds_differ() {
        let draw = |seed| {
            let mut r = Rng::new(seed);
            (0..8).map(|_| r.next_u64()).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        assert_ne!(draw(0), draw(1));
        assert!(draw(0).iter().all(|&x| x != 0));
    }

    #[test]
    fn the_stream_is_pinned() {
        // `compact demo --seed N` prints the same session in every release.
        let mut r = Rng::new(7);
        let first: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
        assert_eq!(first, PINNED_SEED_7);
    }

    const PINNED_SEED_7: [u64; 3] = [0x671edb9de9e9afb7, 0x67e53669d5fb6b34, 0x974ea03046161d80];

    #[test]
    fn draws_stay_in_their_ranges() {
        let mut r = Rng::new(42);
        for _ in 0..10_000 {
            assert!(r.below(10) < 10);
            assert_eq!(r.below(0), 0);
            assert!((3..=5).contains(&r.range(3, 5)));
            assert_eq!(r.range(9, 2), 9);
            assert!(r.log_size(10, 60_000) <= 60_000);
            assert_eq!(*r.pick(&[1]), 1);
        }
        assert_eq!((0..1000).filter(|_| r.chance(0.0)).count(), 0);
        assert!((0..1000).all(|_| r.chance(1.0)));
    }
}
