//! Per-channel affine transform with a fused activation: inference BatchNormalization
//! whose statistics the compiler folded, plus any per-channel Mul/Add after it.

use super::elementwise::{Row, bias_activate, map_row};
use super::simd::vectorize;
use crate::params::ChannelAffine;

/// `y[n, c, i] = act(x[n, c, i] · scale[c] + shift[c])`, one pass over the data.
pub fn channel_affine(p: &ChannelAffine, x: &[f32], scale: &[f32], shift: &[f32], y: &mut [f32]) {
    assert_eq!(x.len(), p.n * p.c * p.inner, "channel_affine: X");
    affine(p, Some(x), scale, shift, y);
}

/// [`channel_affine`] with the input in `y`, overwritten by the result.
pub fn channel_affine_inplace(p: &ChannelAffine, scale: &[f32], shift: &[f32], y: &mut [f32]) {
    affine(p, None, scale, shift, y);
}

/// The body of both forms; `x` is `None` when it is `y` itself.
fn affine(p: &ChannelAffine, x: Option<&[f32]>, scale: &[f32], shift: &[f32], y: &mut [f32]) {
    assert_eq!(y.len(), p.n * p.c * p.inner, "channel_affine: Y");
    assert_eq!(scale.len(), p.c, "channel_affine: scale");
    assert_eq!(shift.len(), p.c, "channel_affine: shift");
    if y.is_empty() {
        return;
    }
    let x = Row::source(x);
    vectorize!({
        for (i, y) in y.chunks_exact_mut(p.inner).enumerate() {
            let c = i % p.c;
            let x = x.sub(i * p.inner, p.inner);
            map_row(y, x, Row::Splat(scale[c]), |x, s| x * s);
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
