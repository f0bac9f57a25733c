//! bfloat16 as raw `u16` bits: the storage format of weights and of activations
//! between NPU kernels. Hot loops widen with a shift instead of `half`'s
//! conversion, which is not vectorised for bf16.

/// Widens bf16 bits to f32 (exact).
#[inline(always)]
pub fn to_f32(bits: u16) -> f32 {
    f32::from_bits((bits as u32) << 16)
}

/// Rounds f32 to the nearest bf16, ties to even; NaN stays NaN (quiet).
#[inline(always)]
pub fn from_f32(value: f32) -> u16 {
    let bits = value.to_bits();
    if value.is_nan() {
        return ((bits >> 16) as u16) | 0x0040;
    }
    let round = 0x7fff + ((bits >> 16) & 1);
    (bits.wrapping_add(round) >> 16) as u16
}

/// Rounds an f32 value through bf16 storage and back.
#[inline(always)]
pub fn round(value: f32) -> f32 {
    to_f32(from_f32(value))
}

pub fn slice_to_f32(src: &[u16], dst: &mut [f32]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = to_f32(s);
    }
}

pub fn slice_from_f32(src: &[f32], dst: &mut [u16]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = from_f32(s);
    }
}

pub fn to_f32_vec(src: &[u16]) -> Vec<f32> {
    src.iter().map(|&b| to_f32(b)).collect()
}

pub fn from_f32_vec(src: &[f32]) -> Vec<u16> {
    src.iter().map(|&v| from_f32(v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_is_exact_for_bf16_values() {
        for bits in [0u16, 0x3f80, 0xbf80, 0x7f7f, 0x0001, 0x8000, 0x4049] {
            assert_eq!(from_f32(to_f32(bits)), bits);
        }
    }

    #[test]
    fn rounds_to_nearest_even() {
        // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties go to even (1.0).
        assert_eq!(from_f32(1.0 + 1.0 / 256.0), 0x3f80);
        // 1 + 3·2^-8 is halfway between 1.0078125 (odd) and 1.015625 (even).
        assert_eq!(from_f32(1.0 + 3.0 / 256.0), 0x3f82);
        assert_eq!(from_f32(1.0 + 1.0 / 256.0 + 1e-6), 0x3f81);
        assert!(to_f32(from_f32(f32::NAN)).is_nan());
    }
}
