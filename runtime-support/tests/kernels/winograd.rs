//! Winograd F(2×2, 3×3) and F(4×4, 3×3) against the naive reference, on output sizes
//! that are and are not multiples of the tile (partial last tiles), every padding
//! pattern a 3×3 stride-1 window can have, several images, blocks that cut tile rows,
//! and every activation; on worker threads, bit for bit against one thread.

use kiln_runtime::Threads;
use kiln_runtime::kernels::{conv2d_winograd, conv2d_winograd_or_direct, winograd_weights};
use kiln_runtime::params::{Conv2d, WINOGRAD_F4_MIN_TILES, Winograd};

use crate::conv::{conv_ref, params};
use crate::reference::{ACTIVATIONS, Rng, assert_bits_eq, assert_close};

/// Sums of 9·c_in terms reordered by the transforms, against an f64 reference: F(2×2)
/// relative to `max(1, |reference|)`, F(4×4) (whose transforms scale inputs by up to
/// 8 before the sums: an error about four times F(2×2)'s over a whole layer) relative
/// to the larger of 1 and the layer's root-mean-square output.
const TOL: f32 = 1e-4;

const VARIANTS: [Winograd; 2] = [Winograd::F2, Winograd::F4];

fn run(
    p: &Conv2d,
    v: Winograd,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    threads: usize,
) -> Vec<f32> {
    let u = winograd_weights(v, p.c_out, p.c_in, w);
    let mut y = vec![f32::NAN; p.n * p.c_out * p.h_out * p.w_out];
    let mut scratch = vec![f32::NAN; p.winograd_scratch_len(v)];
    let pool = Threads::new(threads, p.winograd_scratch_len(v) * 4).expect("threads");
    pool.install(|| conv2d_winograd(p, v, x, &u, bias, &mut y, &mut scratch));
    y
}

/// Both variants, with and without bias, on one and several threads.
fn check(p: Conv2d, seed: u64) {
    assert!(p.winograd_geometry(), "{p:?}");
    let mut rng = Rng::new(seed);
    let x = rng.vec(p.n * p.c_in * p.h_in * p.w_in);
    let w = rng.vec(p.c_out * p.c_in * 9);
    let b = rng.vec(p.c_out);
    for v in VARIANTS {
        for bias in [Some(&b[..]), None] {
            let got = run(&p, v, &x, &w, bias, 1);
            let want = conv_ref(&p, &x, &w, bias);
            let what = format!("{v:?} {p:?} bias {}", bias.is_some());
            match v {
                Winograd::F2 => assert_close(&got, &want, TOL, &what),
                Winograd::F4 => assert_close_to_rms(&got, &want, TOL, &what),
            }
            for threads in [2, 3] {
                let shared = run(&p, v, &x, &w, bias, threads);
                assert_bits_eq(&shared, &got, &format!("{what}, {threads} threads"));
            }
        }
    }
}

/// `|got − want| ≤ tol · max(1, rms(want))` for every element.
fn assert_close_to_rms(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let rms = (want.iter().map(|&w| w as f64 * w as f64).sum::<f64>() / want.len() as f64).sqrt();
    let bound = tol * (rms as f32).max(1.0);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g - w).abs();
        assert!(
            err <= bound,
            "{what}: element {i}: got {g}, want {w} (error {err}, bound {bound}: rms {rms})"
        );
    }
}

fn same(n: usize, c_in: usize, hw: [usize; 2], c_out: usize) -> Conv2d {
    params(n, c_in, hw, c_out, [3, 3], [1, 1], [1, 1], [1; 4], 1)
}

#[test]
fn even_and_odd_sizes() {
    check(same(1, 64, [8, 8], 40), 1);
    check(same(1, 64, [7, 7], 48), 2);
    check(same(2, 65, [9, 14], 40), 3);
    check(same(1, 64, [1, 1], 40), 4);
    check(same(1, 72, [2, 17], 35), 5);
}

#[test]
fn every_padding() {
    for (k, pads) in [
        [0; 4],
        [1, 0, 0, 1],
        [0, 1, 1, 0],
        [2, 1, 0, 2],
        [0, 0, 2, 2],
    ]
    .into_iter()
    .enumerate()
    {
        let p = params(1, 64, [10, 11], 40, [3, 3], [1, 1], [1, 1], pads, 1);
        check(p, 10 + k as u64);
    }
}

/// Wide and tall images: blocks of tiles start and end inside tile rows, a tile row is
/// longer than a block, and threads take several rows each.
#[test]
fn blocks_across_tile_rows() {
    let p = same(1, 64, [30, 230], 64);
    let q = same(1, 64, [77, 21], 40);
    for v in VARIANTS {
        assert!(p.winograd_tiles(v)[1] > p.winograd_block(v));
        let [rows, cols] = q.winograd_tiles(v);
        assert!(rows * cols > 3 * q.winograd_block(v));
    }
    check(p, 20);
    check(q, 21);
}

/// Blocks of whole tile rows are as even as their count allows: 5 rows of 5 F(2×2)
/// tiles over 256 channels (at most 24 tiles a block) go in blocks of 3 rows at most,
/// two blocks, not 4 and 1; 10 rows of 10 F(4×4) tiles over 64 channels (at most 48)
/// in three blocks of 4 rows at most (the kernel takes 3, 3 and 4); SqueezeNet's
/// 32→128 at 27² (7 rows of 7 F(4×4) tiles, at most 24) in three of 3 rows at most
/// (2, 2 and 3, where 3, 3 and 1 left a row of 7 tiles, narrower than a panel). The
/// blocks' most, which sizes the scratch, never shrinks as the image grows (a build
/// over ranges plans it at the largest sizes), and no block takes more.
#[test]
fn even_blocks() {
    let p = same(1, 256, [10, 10], 256);
    assert_eq!(p.winograd_tiles(Winograd::F2), [5, 5]);
    assert_eq!(p.winograd_block_most(Winograd::F2), 24);
    assert_eq!(p.winograd_block(Winograd::F2), 15);
    let q = same(1, 64, [40, 40], 64);
    assert_eq!(q.winograd_tiles(Winograd::F4), [10, 10]);
    assert_eq!(q.winograd_block_most(Winograd::F4), 48);
    assert_eq!(q.winograd_block(Winograd::F4), 40);
    let r = same(1, 32, [27, 27], 128);
    assert_eq!(r.winograd_tiles(Winograd::F4), [7, 7]);
    assert_eq!(r.winograd_block_most(Winograd::F4), 24);
    assert_eq!(r.winograd_block(Winograd::F4), 21);
    check(p, 60);
    check(q, 61);
    check(r, 62);
    for (c_in, c_out) in [(16, 64), (64, 64), (128, 128), (256, 64), (512, 512)] {
        for v in VARIANTS {
            let mut last = 0;
            for h in 1..48 {
                for w in [h, 2 * h + 1] {
                    let p = same(1, c_in, [h, w], c_out);
                    let (block, most) = (p.winograd_block(v), p.winograd_block_most(v));
                    assert!(0 < block && block <= most, "{v:?} {p:?}");
                    if w == h {
                        assert!(most >= last, "{v:?} {p:?}: {most} after {last}");
                        last = most;
                    }
                }
            }
        }
    }
}

/// Layers with fewer input channels than a build over ranges takes, which run as
/// Winograd where the shape decides (SqueezeNet's 16→64 at 55², 32→128 at 27²,
/// 48→192 at 13²; yolov8n's 16→16 at 80²).
#[test]
fn few_input_channels() {
    for (k, (p, v)) in [
        (same(1, 32, [27, 27], 128), Winograd::F4),
        (same(1, 48, [13, 13], 72), Winograd::F4),
        (same(1, 33, [30, 29], 32), Winograd::F4),
        (same(1, 48, [7, 7], 40), Winograd::F2),
        (same(1, 16, [55, 55], 64), Winograd::F4),
        (same(1, 16, [21, 19], 16), Winograd::F4),
        (same(1, 24, [6, 6], 16), Winograd::F2),
    ]
    .into_iter()
    .enumerate()
    {
        assert!(!p.winograd_applies() && p.winograd_variant(true) == Some(v));
        check(p, 50 + k as u64);
    }
}

/// Layers of at most 16 input channels carry their raw weights too, and the direct
/// kernel takes them where the CPU has sixteen lanes: whichever runs matches the
/// reference (to F(4×4)'s bound, the looser), the same bits on two threads as on one.
#[test]
fn direct_rivals() {
    for (k, p) in [
        same(1, 16, [55, 55], 64),
        same(2, 16, [13, 21], 40),
        same(1, 16, [9, 9], 16),
        params(1, 12, [10, 11], 24, [3, 3], [1, 1], [1, 1], [2, 1, 0, 2], 1),
    ]
    .into_iter()
    .enumerate()
    {
        assert!(p.direct_rivals_winograd(), "{p:?}");
        let mut rng = Rng::new(70 + k as u64);
        let x = rng.vec(p.n * p.c_in * p.h_in * p.w_in);
        let w = rng.vec(p.c_out * p.c_in * 9);
        let b = rng.vec(p.c_out);
        let want = conv_ref(&p, &x, &w, Some(&b));
        for v in VARIANTS {
            let u = winograd_weights(v, p.c_out, p.c_in, &w);
            let run = |threads: usize| {
                let mut y = vec![f32::NAN; want.len()];
                let len = p.winograd_scratch_len(v);
                let mut scratch = vec![f32::NAN; len];
                let pool = Threads::new(threads, len * 4).expect("threads");
                pool.install(|| {
                    conv2d_winograd_or_direct(&p, v, &x, &u, &w, Some(&b), &mut y, &mut scratch)
                });
                y
            };
            let got = run(1);
            let what = format!("{v:?} {p:?}");
            assert_close_to_rms(&got, &want, TOL, &what);
            assert_bits_eq(&run(2), &got, &format!("{what}, 2 threads"));
        }
    }
    // Wider inputs, or windows the direct kernel does not take, never do.
    assert!(!same(1, 17, [55, 55], 64).direct_rivals_winograd());
    assert!(
        !params(1, 16, [55, 55], 64, [3, 3], [1, 1], [2, 2], [2; 4], 1).direct_rivals_winograd()
    );
}

/// Which layers run as which variant: by the shape in a build at fixed sizes, F(2×2)
/// by the channels alone in a build over ranges.
#[test]
fn variant_by_shape_and_over_ranges() {
    let cases = [
        // (layer, by shape, over ranges)
        (
            same(1, 64, [56, 56], 64),
            Some(Winograd::F4),
            Some(Winograd::F2),
        ),
        (
            same(1, 512, [7, 7], 512),
            Some(Winograd::F2),
            Some(Winograd::F2),
        ),
        (same(1, 32, [27, 27], 128), Some(Winograd::F4), None),
        (same(1, 48, [13, 13], 192), Some(Winograd::F4), None),
        (same(1, 48, [7, 7], 192), Some(Winograd::F2), None),
        (same(1, 16, [55, 55], 64), Some(Winograd::F4), None),
        (same(1, 31, [13, 13], 64), Some(Winograd::F4), None),
        (same(1, 16, [80, 80], 16), Some(Winograd::F4), None),
        (same(1, 15, [55, 55], 64), None, None),
        (same(1, 64, [55, 55], 15), None, None),
        // The direct kernel's layers (DenseNet's 128→32 at 28², 14², 7²).
        (same(1, 128, [28, 28], 32), Some(Winograd::F4), None),
        (same(1, 128, [14, 14], 32), Some(Winograd::F4), None),
        (same(1, 128, [7, 7], 32), Some(Winograd::F2), None),
        (same(1, 32, [14, 14], 128), Some(Winograd::F4), None),
        (same(1, 32, [56, 56], 31), Some(Winograd::F4), None),
        (
            params(1, 64, [56, 56], 64, [3, 3], [2, 2], [1, 1], [1; 4], 1),
            None,
            None,
        ),
    ];
    for (p, by_shape, over_ranges) in cases {
        assert_eq!(p.winograd_variant(true), by_shape, "{p:?}");
        assert_eq!(p.winograd_variant(false), over_ranges, "{p:?}");
    }
}

/// Wide layers take fewer tiles a block; each product is then shared by rows.
#[test]
fn wide_layers() {
    let p = same(1, 512, [7, 7], 512);
    assert!(p.winograd_block(Winograd::F2) < 96);
    check(p, 30);
    check(same(1, 256, [14, 14], 320), 31);
}

#[test]
fn fused_activations() {
    for (k, &act) in ACTIVATIONS.iter().enumerate() {
        let p = Conv2d {
            activation: act,
            ..same(1, 64, [9, 9], 40)
        };
        check(p, 40 + k as u64);
    }
}

/// Layers the kernel does not take: stride 2, groups, dilation, other windows, few
/// channels (32 output channels go to the direct kernel where their weights fit).
#[test]
fn applies_only_to_three_by_three_stride_one() {
    let ok = same(1, 64, [8, 8], 40);
    assert!(ok.winograd_applies());
    assert!(same(1, 256, [8, 8], 32).winograd_applies());
    for p in [
        Conv2d {
            stride: [2, 2],
            ..ok
        },
        Conv2d { group: 2, ..ok },
        Conv2d {
            dilation: [2, 2],
            ..ok
        },
        Conv2d {
            kernel: [5, 5],
            ..ok
        },
        Conv2d {
            kernel: [3, 1],
            ..ok
        },
        Conv2d { c_in: 63, ..ok },
        Conv2d { c_out: 31, ..ok },
        Conv2d { c_out: 32, ..ok },
    ] {
        assert!(!p.winograd_applies(), "{p:?}");
    }
}

/// F(4×4) where the output has `WINOGRAD_F4_MIN_TILES` of its 4×4 tiles, else F(2×2).
#[test]
fn variant_follows_the_plane() {
    assert_eq!(WINOGRAD_F4_MIN_TILES, 16);
    for (hw, v) in [
        ([13, 13], Winograd::F4),
        ([56, 56], Winograd::F4),
        ([7, 100], Winograd::F4),
        ([12, 12], Winograd::F2),
        ([7, 7], Winograd::F2),
        ([4, 60], Winograd::F2),
    ] {
        assert_eq!(same(1, 64, hw, 64).winograd(), v, "{hw:?}");
    }
}
