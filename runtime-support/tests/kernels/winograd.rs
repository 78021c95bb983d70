//! Winograd F(2×2, 3×3) against the naive reference and against the im2col kernel, on
//! even and odd output sizes (partial last tiles), every padding pattern a 3×3 stride-1
//! window can have, several images, blocks that cut tile rows, and every activation;
//! on worker threads, bit for bit against one thread.

use kiln_runtime::Threads;
use kiln_runtime::kernels::{conv2d_winograd, winograd_weights};
use kiln_runtime::params::Conv2d;

use crate::conv::{conv_ref, params};
use crate::reference::{ACTIVATIONS, Rng, assert_bits_eq, assert_close};

/// Sums of 9·c_in terms reordered by the transforms, against an f64 reference,
/// relative to `max(1, |reference|)`.
const TOL: f32 = 1e-4;

fn run(p: &Conv2d, x: &[f32], w: &[f32], bias: Option<&[f32]>, threads: usize) -> Vec<f32> {
    let u = winograd_weights(p.c_out, p.c_in, w);
    let mut y = vec![f32::NAN; p.n * p.c_out * p.h_out * p.w_out];
    let mut scratch = vec![f32::NAN; p.winograd_scratch_len()];
    let pool = Threads::new(threads, p.winograd_scratch_len() * 4).expect("threads");
    pool.install(|| conv2d_winograd(p, x, &u, bias, &mut y, &mut scratch));
    y
}

fn check(p: Conv2d, seed: u64) {
    assert!(p.winograd_applies(), "{p:?}");
    let mut rng = Rng::new(seed);
    let x = rng.vec(p.n * p.c_in * p.h_in * p.w_in);
    let w = rng.vec(p.c_out * p.c_in * 9);
    let b = rng.vec(p.c_out);
    for bias in [Some(&b[..]), None] {
        let got = run(&p, &x, &w, bias, 1);
        let want = conv_ref(&p, &x, &w, bias);
        let what = format!("{p:?} bias {}", bias.is_some());
        assert_close(&got, &want, TOL, &what);
        for threads in [2, 3] {
            let shared = run(&p, &x, &w, bias, threads);
            assert_bits_eq(&shared, &got, &format!("{what}, {threads} threads"));
        }
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
    assert!(p.winograd_tiles()[1] > p.winograd_block());
    check(p, 20);
    let p = same(1, 64, [57, 21], 40);
    assert!(p.winograd_tiles()[0] * p.winograd_tiles()[1] > 3 * p.winograd_block());
    check(p, 21);
}

/// Wide layers take fewer tiles a block; each product is then shared by rows.
#[test]
fn wide_layers() {
    let p = same(1, 512, [7, 7], 512);
    assert!(p.winograd_block() < 96);
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
