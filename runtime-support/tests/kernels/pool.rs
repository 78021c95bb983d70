use kiln_runtime::Arena;
use kiln_runtime::arena::planes_in_order_are_safe;
use kiln_runtime::kernels::{pool2d, pool2d_overlapping, reduce_mean};
use kiln_runtime::params::{Pool2d, PoolKind, ReduceMean};

use crate::reference::{Rng, assert_close};

/// Sums of at most a few dozen terms, relative.
const TOL: f32 = 1e-5;

/// ONNX output length, with the ceil_mode rule that the last window must start inside
/// the input or its leading padding.
fn out_len(inp: usize, k: usize, s: usize, d: usize, pb: usize, pe: usize, ceil: bool) -> usize {
    let span = d * (k - 1) + 1;
    let room = inp + pb + pe - span;
    let mut out = if ceil { room.div_ceil(s) } else { room / s } + 1;
    if ceil && (out - 1) * s >= inp + pb {
        out -= 1;
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn params(
    kind: PoolKind,
    c: usize,
    hw: [usize; 2],
    kernel: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
    pads: [usize; 4],
    ceil: bool,
) -> Pool2d {
    let o = |i: usize| {
        out_len(
            hw[i],
            kernel[i],
            stride[i],
            dilation[i],
            pads[i],
            pads[i + 2],
            ceil,
        )
    };
    Pool2d {
        kind,
        n: 2,
        c,
        h_in: hw[0],
        w_in: hw[1],
        h_out: o(0),
        w_out: o(1),
        kernel,
        stride,
        dilation,
        pads,
    }
}

fn pool_ref(p: &Pool2d, x: &[f32]) -> Vec<f32> {
    let mut y = Vec::new();
    for plane in x.chunks(p.h_in * p.w_in) {
        for oh in 0..p.h_out {
            for ow in 0..p.w_out {
                let (mut max, mut sum, mut inside, mut padded) = (f32::NEG_INFINITY, 0.0f64, 0, 0);
                for ki in 0..p.kernel[0] {
                    for kj in 0..p.kernel[1] {
                        let ih =
                            (oh * p.stride[0] + ki * p.dilation[0]) as isize - p.pads[0] as isize;
                        let iw =
                            (ow * p.stride[1] + kj * p.dilation[1]) as isize - p.pads[1] as isize;
                        let in_pads = ih < (p.h_in + p.pads[2]) as isize
                            && iw < (p.w_in + p.pads[3]) as isize;
                        padded += in_pads as usize;
                        if ih < 0 || iw < 0 || ih >= p.h_in as isize || iw >= p.w_in as isize {
                            continue;
                        }
                        let v = plane[ih as usize * p.w_in + iw as usize];
                        max = max.max(v);
                        sum += v as f64;
                        inside += 1;
                    }
                }
                y.push(match p.kind {
                    PoolKind::Max => max,
                    PoolKind::Average { count_include_pad } => {
                        let n = if count_include_pad { padded } else { inside };
                        (sum / n as f64) as f32
                    }
                });
            }
        }
    }
    y
}

fn check(p: Pool2d, seed: u64) {
    let x = Rng::new(seed).vec(p.n * p.c * p.h_in * p.w_in);
    let mut y = vec![f32::NAN; p.n * p.c * p.h_out * p.w_out];
    pool2d(&p, &x, &mut y);
    assert_close(&y, &pool_ref(&p, &x), TOL, &format!("{p:?}"));
    assert_eq!(overlapped(&p, &x), y, "overlapped {p:?}");
}

/// [`pool2d_overlapping`] with its output as far into its input as the plane order
/// allows (the planner's tightest overlap, without alignment).
pub(crate) fn overlapped(p: &Pool2d, x: &[f32]) -> Vec<f32> {
    let (planes, px, py) = (p.n * p.c, p.h_in * p.w_in, p.h_out * p.w_out);
    let y_len = planes * py;
    // The input at element `y_len`, so that the output may start anywhere before it.
    let x_at = y_len;
    let d = (0..=y_len)
        .find(|&back| planes_in_order_are_safe(x_at, x_at - back, px, py, planes))
        .expect("an output wholly before its input is always safe");
    let mut arena = Arena::new((x_at + x.len() + y_len) * 4);
    arena.as_f32_mut()[x_at..x_at + x.len()].copy_from_slice(x);
    let y_at = x_at - d;
    let xy = arena
        .regions_overlapping("pool", (y_at * 4, y_len), (x_at * 4, x.len()), planes)
        .unwrap();
    pool2d_overlapping(p, xy);
    arena.as_f32()[y_at..y_at + y_len].to_vec()
}

const KINDS: [PoolKind; 3] = [
    PoolKind::Max,
    PoolKind::Average {
        count_include_pad: false,
    },
    PoolKind::Average {
        count_include_pad: true,
    },
];

#[test]
fn pools_match_reference() {
    for (i, kind) in KINDS.into_iter().enumerate() {
        let s = i as u64 * 10;
        // ResNet's stem max pool shape, small.
        check(
            params(kind, 3, [11, 12], [3, 3], [2, 2], [1, 1], [1; 4], false),
            s,
        );
        // Asymmetric pads, dilation, unequal strides.
        check(
            params(
                kind,
                2,
                [9, 10],
                [3, 2],
                [2, 3],
                [2, 1],
                [2, 0, 1, 1],
                false,
            ),
            s + 1,
        );
        // ceil_mode: the last window runs past the bottom/right padding.
        check(
            params(kind, 2, [8, 7], [3, 3], [2, 2], [1, 1], [0; 4], true),
            s + 2,
        );
        // Rows of 16 outputs and more, 3 wide at stride 2 (folded across by AVX2
        // shuffles): whole blocks of 8 and a partial one, padded, ceil_mode.
        check(
            params(kind, 2, [9, 37], [3, 3], [2, 2], [1, 1], [1; 4], false),
            s + 20,
        );
        check(
            params(kind, 3, [7, 64], [3, 3], [2, 2], [1, 1], [0, 1, 0, 0], true),
            s + 21,
        );
        check(
            params(kind, 1, [5, 111], [3, 3], [2, 2], [1, 1], [0; 4], false),
            s + 22,
        );
        check(
            params(kind, 2, [10, 9], [3, 2], [3, 2], [1, 2], [1, 0, 1, 1], true),
            s + 3,
        );
        // Stride 1, same padding (Inception's 3x3 average pool).
        check(
            params(kind, 3, [7, 5], [3, 3], [1, 1], [1, 1], [1; 4], false),
            s + 4,
        );
        // Window as large as the input; 1x1 input.
        check(
            params(kind, 4, [5, 6], [5, 6], [1, 1], [1, 1], [0; 4], false),
            s + 5,
        );
        check(
            params(kind, 1, [1, 1], [1, 1], [1, 1], [1, 1], [0; 4], false),
            s + 6,
        );
        check(
            params(kind, 1, [1, 1], [2, 2], [2, 2], [1, 1], [0, 0, 1, 1], true),
            s + 7,
        );
        // Stride 1 with the output as large as the input, several planes per pass:
        // YOLO's 5×5 SPPF pool, uneven pads, dilation, a plane narrower than the pads.
        check(
            params(kind, 3, [10, 10], [5, 5], [1, 1], [1, 1], [2; 4], false),
            s + 12,
        );
        check(
            params(kind, 3, [6, 8], [5, 5], [1, 1], [1, 1], [2, 1, 2, 3], false),
            s + 13,
        );
        check(
            params(kind, 2, [7, 9], [3, 3], [1, 1], [2, 2], [1, 3, 3, 1], false),
            s + 14,
        );
        check(
            params(kind, 5, [2, 3], [5, 5], [1, 1], [1, 1], [2; 4], false),
            s + 15,
        );
        // A tall stride-2 plane with padding rows at the top and bottom (row by row),
        // a plane taller than one band of stride-1 rows (the kernel's buffers hold
        // 2048 floats), an odd left pad at stride 2 (the first column goes to the odd
        // phase), and bands of stride-1 rows with a horizontal stride of 2.
        check(
            params(kind, 2, [70, 61], [3, 3], [2, 2], [1, 1], [1; 4], false),
            s + 9,
        );
        check(
            params(kind, 1, [90, 40], [3, 3], [1, 1], [1, 1], [1; 4], false),
            s + 10,
        );
        check(
            params(kind, 2, [9, 12], [3, 3], [2, 2], [1, 1], [0, 1, 2, 2], true),
            s + 11,
        );
        check(
            params(
                kind,
                2,
                [20, 31],
                [3, 3],
                [1, 2],
                [1, 1],
                [1, 1, 1, 0],
                false,
            ),
            s + 16,
        );
        // Rows too wide for one band of the buffers go tap by tap.
        check(
            params(
                kind,
                1,
                [3, 1030],
                [2, 3],
                [1, 2],
                [1, 1],
                [0, 1, 1, 1],
                false,
            ),
            s + 8,
        );
    }
}

/// Narrow planes pooled in interleaved blocks of eight (full blocks, whose rows go
/// through the AVX2 transposes, and a partial one), on the zoo's shapes: each must
/// match the reference, and the plane-by-plane overlapping pool bit for bit (an
/// average folds its taps in the same order both ways).
#[test]
fn interleaved_blocks() {
    for (i, kind) in KINDS.into_iter().enumerate() {
        let s = 100 + i as u64 * 10;
        let with = |c: usize, hw: usize, k: usize, st: usize, pads: [usize; 4], ceil: bool| {
            params(kind, c, [hw, hw], [k, k], [st, st], [1, 1], pads, ceil)
        };
        // SqueezeNet's and Inception's stride-2 max pools, odd and even planes.
        check(with(19, 27, 3, 2, [0; 4], false), s);
        check(with(13, 14, 3, 2, [0, 0, 1, 1], false), s + 1);
        check(with(9, 28, 3, 2, [0; 4], true), s + 2);
        // Inception's stride-1 3×3 pools, DenseNet's 2×2 stride-2 average, a 7×7
        // plane pooled whole, YOLO's 5×5 SPPF.
        check(with(21, 14, 3, 1, [1; 4], false), s + 3);
        check(with(11, 7, 3, 1, [1; 4], false), s + 4);
        check(with(17, 28, 2, 2, [0; 4], false), s + 5);
        check(with(20, 7, 7, 1, [0; 4], false), s + 6);
        check(with(8, 10, 5, 1, [2; 4], false), s + 7);
    }
}

/// Max pools 3×3 at stride 2 without padding, which `strided_max` takes where the
/// CPU has AVX-512: rows of every width up to its 128 columns and past them, odd and
/// even heights, against the reference; then NaNs, which it leaves out as the
/// reference's fold from -∞ by `f32::max` does (a window of NaNs only gives -∞).
#[test]
fn strided_max_pools() {
    let with = |c: usize, h: usize, w: usize| {
        params(
            PoolKind::Max,
            c,
            [h, w],
            [3, 3],
            [2, 2],
            [1, 1],
            [0; 4],
            false,
        )
    };
    for w in [
        3, 4, 5, 15, 16, 17, 27, 31, 32, 33, 34, 47, 55, 63, 64, 65, 109, 112, 128, 129,
    ] {
        for h in [3, 4, 9] {
            check(with(3, h, w), (w * 10 + h) as u64);
        }
    }
    for w in [27, 55, 112] {
        let p = with(5, 9, w);
        let mut x = Rng::new(7).vec(p.n * p.c * p.h_in * p.w_in);
        for v in x.iter_mut().step_by(5) {
            *v = f32::NAN;
        }
        // The first window of the second plane: NaNs only.
        for r in 0..3 {
            x[p.h_in * p.w_in + r * p.w_in..][..3].fill(f32::NAN);
        }
        let mut y = vec![0.0; p.n * p.c * p.h_out * p.w_out];
        pool2d(&p, &x, &mut y);
        let want = pool_ref(&p, &x);
        assert_eq!(
            y[p.h_out * p.w_out],
            f32::NEG_INFINITY,
            "{p:?}: a window of NaNs"
        );
        for (i, (&got, &want)) in y.iter().zip(&want).enumerate() {
            let same = got == want || (got.is_nan() && want.is_nan());
            assert!(same, "{p:?} output {i}: {got} against {want}");
        }
    }
}

#[test]
fn reduce_mean_rows() {
    for (outer, inner) in [(1, 1), (3, 49), (2, 257), (5, 8), (64, 7)] {
        let x = Rng::new(inner as u64).vec(outer * inner);
        let mut y = vec![0.0; outer];
        reduce_mean(&ReduceMean { outer, inner }, &x, &mut y);
        let want: Vec<f32> = x
            .chunks(inner)
            .map(|r| (r.iter().map(|&v| v as f64).sum::<f64>() / inner as f64) as f32)
            .collect();
        assert_close(&y, &want, TOL, &format!("reduce_mean {outer}x{inner}"));
    }
}
