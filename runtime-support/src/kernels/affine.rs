//! Per-channel affine transform with a fused activation: inference BatchNormalization
//! whose statistics the compiler folded, plus any per-channel Mul/Add after it.

use super::elementwise::bias_activate;
use super::simd::vectorize;
use crate::params::ChannelAffine;

/// `y[n, c, i] = act(x[n, c, i] · scale[c] + shift[c])`, one pass over the data.
pub fn channel_affine(p: &ChannelAffine, x: &[f32], scale: &[f32], shift: &[f32], y: &mut [f32]) {
    assert_eq!(x.len(), p.n * p.c * p.inner, "channel_affine: X");
    assert_eq!(y.len(), x.len(), "channel_affine: Y");
    assert_eq!(scale.len(), p.c, "channel_affine: scale");
    assert_eq!(shift.len(), p.c, "channel_affine: shift");
    if y.is_empty() {
        return;
    }
    vectorize!({
        let blocks = x.chunks_exact(p.inner).zip(y.chunks_exact_mut(p.inner));
        for (i, (x, y)) in blocks.enumerate() {
            let c = i % p.c;
            let s = scale[c];
            // A `for` loop, not `for_each`: the latter goes through an out-of-line
            // `fold` that `vectorize!` cannot reach (see `simd.rs`).
            for (y, &x) in y.iter_mut().zip(x) {
                *y = x * s;
            }
            bias_activate(p.activation, shift[c], y);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Activation;

    #[test]
    fn scales_shifts_and_activates_per_channel() {
        let p = ChannelAffine {
            n: 2,
            c: 3,
            inner: 2,
            activation: Activation::Relu,
        };
        let x: Vec<f32> = (0..12).map(|i| i as f32 - 6.0).collect();
        let (scale, shift) = ([1.0, -2.0, 0.5], [0.5, 1.0, -1.0]);
        let mut y = vec![0.0; 12];
        channel_affine(&p, &x, &scale, &shift, &mut y);
        for (i, (&y, &x)) in y.iter().zip(&x).enumerate() {
            let c = (i / 2) % 3;
            assert_eq!(y, (x * scale[c] + shift[c]).max(0.0), "element {i}");
        }
    }
}
