//! A small seeded generator for random weights and test tensors. Hand-written so
//! that the numbers a seed produces never change with a dependency's version:
//! seeded models must stay byte-identical across machines and releases.

/// SplitMix64 (Steele, Lea, Flood 2014): tiny state, full 64-bit period, good
/// enough statistics for weight initialisation.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// A generator for one named stream (e.g. a tensor name) under a seed, so
    /// tensors do not depend on the order in which they are generated.
    pub fn for_stream(seed: u64, stream: &str) -> Self {
        // FNV-1a over the stream name, mixed with the seed.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in stream.bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        let mut mixer = Self::new(seed ^ h);
        Self::new(mixer.next_u64())
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) with 24 bits of mantissa.
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * (1.0 / (1u64 << 24) as f32)
    }

    /// Uniform in [-1, 1).
    pub fn next_signed(&mut self) -> f32 {
        self.next_f32() * 2.0 - 1.0
    }

    /// Approximately normal N(0, 1): the sum of four uniforms, rescaled. Cheaper
    /// than Box-Muller for billions of weights, bounded tails (|x| < 3.47).
    pub fn next_normal(&mut self) -> f32 {
        let u = self.next_u64();
        let s: u32 = (0..4).map(|i| ((u >> (16 * i)) & 0xffff) as u32).sum();
        // Sum of 4 U(0, 65536) has mean 131070, variance 4·65536²/12.
        (s as f32 - 131_070.0) * (3.0f32.sqrt() / 65_536.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_deterministic_and_distinct() {
        let a: Vec<u64> = (0..4)
            .map({
                let mut g = SplitMix64::for_stream(7, "w");
                move |_| g.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..4)
            .map({
                let mut g = SplitMix64::for_stream(7, "w");
                move |_| g.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(
            SplitMix64::for_stream(7, "w").next_u64(),
            SplitMix64::for_stream(7, "v").next_u64()
        );
    }

    #[test]
    fn normal_has_unit_variance() {
        let mut g = SplitMix64::new(1);
        let n = 200_000;
        let xs: Vec<f64> = (0..n).map(|_| g.next_normal() as f64).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((var - 1.0).abs() < 0.02, "variance {var}");
    }
}
