use kiln_runtime::kernels::{
    batch_norm, batch_norm_inplace, lrn, lrn_inplace, softmax, softmax_inplace,
};
use kiln_runtime::params::{BatchNorm, Lrn, Softmax};

use crate::reference::{Rng, assert_bits_eq, assert_close};

/// A handful of f32 operations per element, relative.
const TOL: f32 = 1e-5;

#[test]
fn batch_norm_matches_definition() {
    for (n, c, inner) in [(1, 1, 1), (2, 3, 49), (1, 257, 5), (3, 2, 255)] {
        let mut rng = Rng::new(inner as u64);
        let x = rng.vec(n * c * inner);
        let (scale, bias, mean) = (rng.vec(c), rng.vec(c), rng.vec(c));
        let var: Vec<f32> = rng.vec(c).iter().map(|v| v.abs() + 0.1).collect();
        let p = BatchNorm {
            n,
            c,
            inner,
            epsilon: 1e-5,
        };
        let mut y = vec![f32::NAN; x.len()];
        batch_norm(&p, &x, &scale, &bias, &mean, &var, &mut y);
        let want: Vec<f32> = (0..x.len())
            .map(|i| {
                let ch = i / inner % c;
                let norm = (x[i] as f64 - mean[ch] as f64) / (var[ch] as f64 + 1e-5).sqrt();
                (scale[ch] as f64 * norm + bias[ch] as f64) as f32
            })
            .collect();
        assert_close(&y, &want, TOL, &format!("{p:?}"));
        let mut in_place = x.clone();
        batch_norm_inplace(&p, &scale, &bias, &mean, &var, &mut in_place);
        assert_bits_eq(&in_place, &y, &format!("in place {p:?}"));
    }
}

#[test]
fn lrn_matches_onnx_definition() {
    for (size, c) in [(1, 3), (2, 5), (3, 4), (5, 7), (4, 2), (7, 3)] {
        let (n, inner) = (2, 6);
        let p = Lrn {
            n,
            c,
            inner,
            size,
            alpha: 1e-2,
            beta: 0.75,
            bias: 2.0,
        };
        let x: Vec<f32> = Rng::new(size as u64)
            .vec(n * c * inner)
            .iter()
            .map(|v| v * 4.0)
            .collect();
        let mut y = vec![f32::NAN; x.len()];
        lrn(&p, &x, &mut y);
        let mut want = vec![0.0; x.len()];
        for b in 0..n {
            for ch in 0..c {
                let lo = ch.saturating_sub((size - 1) / 2);
                let hi = (ch + (size - 1).div_ceil(2)).min(c - 1);
                for i in 0..inner {
                    let at = |k: usize| x[(b * c + k) * inner + i] as f64;
                    let sq: f64 = (lo..=hi).map(|k| at(k) * at(k)).sum();
                    let d = (2.0 + 1e-2 / size as f64 * sq).powf(0.75);
                    want[(b * c + ch) * inner + i] = (at(ch) / d) as f32;
                }
            }
        }
        assert_close(&y, &want, TOL, &format!("{p:?}"));
    }
}

/// In place, LRN keeps the channels it overwrote in a ring, block of columns by block:
/// every awkward channel count, block remainder and window gives the out-of-place bits.
#[test]
fn lrn_in_place_matches_out_of_place() {
    for (k, (n, c, inner, size)) in [1, 3, 7, 255]
        .into_iter()
        .flat_map(|c| {
            [1, 3, 63, 257].into_iter().flat_map(move |inner| {
                [1, 2, 3, 5, 16]
                    .into_iter()
                    .map(move |size| (1 + c % 2, c, inner, size))
            })
        })
        .enumerate()
    {
        let p = Lrn {
            n,
            c,
            inner,
            size,
            alpha: 1e-2,
            beta: 0.75,
            bias: 2.0,
        };
        let x: Vec<f32> = Rng::new(k as u64)
            .vec(n * c * inner)
            .iter()
            .map(|v| v * 4.0)
            .collect();
        let mut y = vec![f32::NAN; x.len()];
        lrn(&p, &x, &mut y);
        let mut in_place = x.clone();
        lrn_inplace(&p, &mut in_place);
        assert_bits_eq(&in_place, &y, &format!("in place {p:?}"));
    }
}

fn softmax_ref(p: &Softmax, x: &[f32]) -> Vec<f32> {
    let mut y = vec![0.0; x.len()];
    for o in 0..p.outer {
        for i in 0..p.inner {
            let idx = |j: usize| (o * p.len + j) * p.inner + i;
            let m = (0..p.len)
                .map(|j| x[idx(j)] as f64)
                .fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = (0..p.len).map(|j| (x[idx(j)] as f64 - m).exp()).sum();
            for j in 0..p.len {
                let v = x[idx(j)] as f64 - m;
                y[idx(j)] = if p.log { v - s.ln() } else { v.exp() / s } as f32;
            }
        }
    }
    y
}

#[test]
fn softmax_and_log_softmax() {
    let shapes = [
        (1, 1000, 1),
        (3, 7, 1),
        (2, 5, 3),
        (2, 9, 70),
        (1, 1, 129),
        (4, 257, 1),
        (1, 3, 255),
        (2, 4, 64),
        (1, 2, 65),
        (1, 300, 1),
    ];
    for (k, (outer, len, inner)) in shapes.into_iter().enumerate() {
        for log in [false, true] {
            let p = Softmax {
                outer,
                len,
                inner,
                log,
            };
            // Large logits: only a max-subtracting implementation survives them.
            let x: Vec<f32> = Rng::new(k as u64)
                .vec(outer * len * inner)
                .iter()
                .map(|v| v * 60.0 + 30.0)
                .collect();
            let mut y = vec![f32::NAN; x.len()];
            softmax(&p, &x, &mut y);
            // Log-softmax values are large and near-exact; softmax probabilities are
            // compared absolutely (relative to max(1, |p|)).
            assert_close(&y, &softmax_ref(&p, &x), TOL, &format!("{p:?}"));
            let mut in_place = x.clone();
            softmax_inplace(&p, &mut in_place);
            assert_bits_eq(&in_place, &y, &format!("in place {p:?}"));
        }
    }
}
