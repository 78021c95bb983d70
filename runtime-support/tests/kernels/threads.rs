//! Kernels that share their work among a context's threads, run inside
//! `Threads::install`: against the naive reference (the kernels' own tolerances) and
//! bit for bit against the same kernel on one thread, since each output element is
//! still one thread's sum in the same order (only its block differs). Every case
//! weighs at least `MIN_WORK` (2^18) multiply-adds, so it is really shared.

use kiln_runtime::Threads;
use kiln_runtime::kernels::{
    conv2d, conv2d_max_pool, conv2d_residual, gemm, matmul_packed, pack_b, pool2d, softmax,
    softmax_inplace, unary, unary_inplace,
};
use kiln_runtime::params::{
    Activation, Conv2d, Gemm, PackedMatMul, Pool2d, PoolKind, Softmax, Unary,
};

use crate::conv::{conv_ref, conv_residual_ref, conv_then_pool, max_pool_of, params};
use crate::gemm::{gemm_params, gemm_ref};
use crate::reference::{Rng, activation_ref, assert_bits_eq, assert_close};

/// f32 sums of a few thousand terms against an f64 reference, relative.
const TOL: f32 = 1e-4;

fn run_conv(p: &Conv2d, x: &[f32], w: &[f32], bias: &[f32], threads: &Threads) -> Vec<f32> {
    let mut y = vec![f32::NAN; p.n * p.c_out * p.h_out * p.w_out];
    let mut scratch = vec![f32::NAN; p.scratch_len()];
    threads.install(|| conv2d(p, x, w, Some(bias), &mut y, &mut scratch));
    y
}

#[test]
fn conv2d_blocks_and_products_on_several_threads() {
    let cases = [
        // im2col: 56×56 positions in many blocks, the remainder joining the last.
        params(1, 40, [56, 56], 32, [3, 3], [1, 1], [1, 1], [1, 1, 1, 1], 1),
        // Direct: runs of blocks of output channels (the last partial) per thread.
        params(1, 16, [56, 56], 32, [3, 3], [1, 1], [1, 1], [1, 1, 1, 1], 1),
        params(2, 3, [41, 38], 44, [3, 3], [2, 2], [1, 1], [1, 0, 1, 1], 1),
        // Two images, two groups, stride 2, fewer positions than one block per thread.
        params(2, 8, [15, 13], 12, [3, 3], [2, 2], [1, 1], [1, 0, 1, 2], 2),
        // Pointwise: one product over the plane, split by columns, then by rows.
        params(1, 64, [28, 28], 96, [1, 1], [1, 1], [1, 1], [0; 4], 1),
        params(1, 256, [7, 7], 512, [1, 1], [1, 1], [1, 1], [0; 4], 1),
        // Pointwise with a dot-product tail: 13×13 in two blocks of columns; 7×7 in
        // one, shared by bands of rows (31 rows: a partial row block).
        params(1, 600, [13, 13], 40, [1, 1], [1, 1], [1, 1], [0; 4], 1),
        params(1, 300, [7, 7], 31, [1, 1], [1, 1], [1, 1], [0; 4], 1),
        // Inputs over 1 MiB, the next block's part fetched ahead: in runs of blocks,
        // in narrower blocks (fewer rows than columns), and in bands of rows (more
        // rows; two runs of input channels).
        params(1, 300, [40, 40], 20, [1, 1], [1, 1], [1, 1], [0; 4], 1),
        params(1, 600, [24, 24], 10, [1, 1], [1, 1], [1, 1], [0; 4], 1),
        params(1, 600, [24, 24], 640, [1, 1], [1, 1], [1, 1], [0; 4], 1),
        // One position (a squeeze-excitation's 512→128): 65k multiply-adds, shared
        // for its weights read (`WEIGHT_READ_MACS`), by bands of rows.
        params(1, 512, [1, 1], 128, [1, 1], [1, 1], [1, 1], [0; 4], 1),
        // One block of 49 positions: its product is split by rows instead.
        params(1, 64, [7, 7], 128, [3, 3], [1, 1], [1, 1], [1, 1, 1, 1], 1),
        // Depthwise: planes shared out, padded ones bordered in each thread's scratch
        // (3×3 stride 1, 5×5 stride 2 with asymmetric pads, unpadded 3×3).
        params(
            1,
            64,
            [28, 28],
            64,
            [3, 3],
            [1, 1],
            [1, 1],
            [1, 1, 1, 1],
            64,
        ),
        params(
            2,
            48,
            [19, 17],
            48,
            [5, 5],
            [2, 2],
            [1, 1],
            [2, 1, 2, 3],
            48,
        ),
        params(1, 96, [28, 28], 96, [3, 3], [1, 1], [1, 1], [0; 4], 96),
        // Depthwise in bands of output rows of every block (more positions than
        // channels, tall bands on whole cache lines): a partial block, three bands at
        // 3 threads (22, 22 and 20 rows); stride 2, 5×5, two images, bands at 2
        // threads only.
        params(1, 20, [64, 64], 20, [3, 3], [1, 1], [1, 1], [1; 4], 20),
        params(
            2,
            24,
            [68, 64],
            24,
            [5, 5],
            [2, 2],
            [1, 1],
            [2, 1, 2, 2],
            24,
        ),
        // Strided 1×1 (through im2col) and a 7×7 stem.
        params(1, 32, [28, 28], 64, [1, 1], [2, 2], [1, 1], [0; 4], 1),
        params(1, 3, [64, 64], 16, [7, 7], [2, 2], [1, 1], [3, 3, 3, 3], 1),
        // Direct stems of fewer blocks of output channels than two a thread, taken in
        // bands of output rows: rows not shared out evenly, a partial block, batches.
        params(2, 3, [37, 45], 12, [3, 3], [2, 2], [1, 1], [1; 4], 1),
        params(1, 3, [40, 40], 16, [3, 3], [2, 2], [1, 1], [0, 1, 1, 0], 1),
    ];
    assert!(cases[cases.len() - 2..].iter().all(Conv2d::direct_applies));
    for (i, base) in cases.into_iter().enumerate() {
        let p = Conv2d {
            activation: Activation::Relu,
            ..base
        };
        let mut rng = Rng::new(40 + i as u64);
        let x = rng.vec(p.n * p.c_in * p.h_in * p.w_in);
        let w = rng.vec(p.c_out * p.c_in / p.group * p.kernel[0] * p.kernel[1]);
        let bias = rng.vec(p.c_out);
        let one = run_conv(&p, &x, &w, &bias, &Threads::default());
        for n in [2, 3] {
            let threads = Threads::new(n, p.scratch_len() * 4).unwrap();
            let got = run_conv(&p, &x, &w, &bias, &threads);
            let want: Vec<f32> = conv_ref(&p, &x, &w, Some(&bias))
                .into_iter()
                .map(|v| activation_ref(p.activation, v))
                .collect();
            let what = format!("{p:?} on {n} threads");
            assert_close(&got, &want, TOL, &what);
            assert_bits_eq(&got, &one, &what);
        }
    }
}

/// `conv2d_residual` where threads split the output stage: im2col blocks per thread,
/// a pointwise product split by columns, one block split by rows, a strided 1×1.
/// The direct kernel with a max pool fused in: each thread pools the blocks of output
/// channels it computed, in rings of its own scratch.
#[test]
fn conv2d_max_pool_on_several_threads() {
    let cases = [
        (
            params(1, 3, [61, 57], 64, [3, 3], [2, 2], [1, 1], [0; 4], 1),
            [0; 4],
        ),
        (
            params(2, 3, [48, 44], 44, [7, 7], [2, 2], [1, 1], [3; 4], 1),
            [1; 4],
        ),
    ];
    for (i, (conv, pads)) in cases.into_iter().enumerate() {
        let p = Conv2d {
            activation: Activation::Relu,
            ..conv
        };
        let pool = max_pool_of(&p, [3, 3], [2, 2], [1, 1], pads, false);
        let mut rng = Rng::new(130 + i as u64);
        let x = rng.vec(p.n * p.c_in * p.h_in * p.w_in);
        let w = rng.vec(p.c_out * p.c_in * p.kernel[0] * p.kernel[1]);
        let b = rng.vec(p.c_out);
        let scratch_len = p.max_pool_scratch_len(&pool);
        let run = |threads: &Threads| {
            let mut y = vec![f32::NAN; pool.n * pool.c * pool.h_out * pool.w_out];
            let mut scratch = vec![f32::NAN; scratch_len];
            threads.install(|| conv2d_max_pool(&p, &pool, &x, &w, Some(&b), &mut y, &mut scratch));
            y
        };
        let want = conv_then_pool(&p, &pool, &x, &w, &b);
        let threads = Threads::new(2, scratch_len * 4).unwrap();
        assert_bits_eq(&run(&threads), &want, &format!("{p:?}, two threads"));
        assert_bits_eq(
            &run(&Threads::default()),
            &want,
            &format!("{p:?}, one thread"),
        );
    }
}

/// Unary ops evaluated by polynomials, shared in one run a thread (a length that is
/// no multiple of the runs' 64, in place too): bit for bit as on one thread.
#[test]
fn unary_runs_on_several_threads() {
    let x: Vec<f32> = Rng::new(140).vec(70_001).iter().map(|v| v * 6.0).collect();
    for op in [Unary::Gelu { tanh: false }, Unary::Exp, Unary::Erf] {
        let run = |threads: &Threads| {
            let mut y = vec![f32::NAN; x.len()];
            let mut inplace = x.clone();
            threads.install(|| {
                unary(op, &x, &mut y);
                unary_inplace(op, &mut inplace);
            });
            (y, inplace)
        };
        let (one, one_inplace) = run(&Threads::default());
        let (two, two_inplace) = run(&Threads::new(2, 0).unwrap());
        assert_bits_eq(&two, &one, &format!("{op:?}"));
        assert_bits_eq(&two_inplace, &one_inplace, &format!("{op:?} in place"));
        assert_bits_eq(
            &one_inplace,
            &one,
            &format!("{op:?}: in place against apart"),
        );
    }
}

#[test]
fn conv2d_residual_on_several_threads() {
    let cases = [
        params(1, 40, [56, 56], 32, [3, 3], [1, 1], [1, 1], [1, 1, 1, 1], 1),
        params(1, 64, [28, 28], 96, [1, 1], [1, 1], [1, 1], [0; 4], 1),
        params(1, 600, [7, 7], 40, [1, 1], [1, 1], [1, 1], [0; 4], 1),
        params(1, 64, [7, 7], 128, [3, 3], [1, 1], [1, 1], [1, 1, 1, 1], 1),
        params(1, 32, [28, 28], 64, [1, 1], [2, 2], [1, 1], [0; 4], 1),
    ];
    for (i, base) in cases.into_iter().enumerate() {
        let p = Conv2d {
            activation: Activation::Relu,
            ..base
        };
        let mut rng = Rng::new(90 + i as u64);
        let x = rng.vec(p.n * p.c_in * p.h_in * p.w_in);
        let w = rng.vec(p.c_out * p.c_in / p.group * p.kernel[0] * p.kernel[1]);
        let bias = rng.vec(p.c_out);
        let r = rng.vec(p.n * p.c_out * p.h_out * p.w_out);
        let run = |threads: &Threads| {
            let mut y = vec![f32::NAN; r.len()];
            let mut scratch = vec![f32::NAN; p.scratch_len()];
            threads.install(|| conv2d_residual(&p, &x, &w, Some(&bias), &r, &mut y, &mut scratch));
            y
        };
        let one = run(&Threads::default());
        let want = conv_residual_ref(&p, &x, &w, Some(&bias), &r);
        assert_close(&one, &want, TOL, &format!("{p:?} on 1 thread"));
        let threads = Threads::new(2, p.scratch_len() * 4).unwrap();
        let got = run(&threads);
        assert_bits_eq(&got, &one, &format!("{p:?} on 2 threads"));
    }
}

#[test]
fn conv2d_falls_back_to_one_thread_when_workers_lack_scratch() {
    let p = params(1, 8, [20, 20], 8, [3, 3], [1, 1], [1, 1], [1, 1, 1, 1], 1);
    let mut rng = Rng::new(7);
    let (x, w, bias) = (rng.vec(8 * 400), rng.vec(8 * 8 * 9), rng.vec(8));
    let threads = Threads::new(2, p.scratch_len() * 4 - 4).unwrap();
    let got = run_conv(&p, &x, &w, &bias, &threads);
    assert_bits_eq(
        &got,
        &run_conv(&p, &x, &w, &bias, &Threads::default()),
        "fallback",
    );
}

/// Pools shared by groups of planes, and the overlapping pool by runs of planes
/// whose outputs have fallen behind the inputs still to read (1, 4, 16, … planes
/// for a stride-2 pool over its own input): bit for bit as on one thread.
#[test]
fn pooling_planes_on_several_threads() {
    let cases = [
        (PoolKind::Max, 56, [3, 3], [2, 2], [1, 1, 1, 1]),
        // SqueezeNet's first max pool (no padding, odd side).
        (PoolKind::Max, 111, [3, 3], [2, 2], [0; 4]),
        // Narrow planes: interleaved blocks of eight.
        (PoolKind::Max, 28, [3, 3], [2, 2], [0; 4]),
        (
            PoolKind::Average {
                count_include_pad: false,
            },
            56,
            [3, 3],
            [1, 1],
            [1, 1, 1, 1],
        ),
    ];
    for (kind, hw, kernel, stride, pads) in cases {
        let c = 64;
        let out = |i: usize| (hw + pads[i] + pads[i + 2] - kernel[i]) / stride[i] + 1;
        let p = Pool2d {
            n: 1,
            c,
            h_in: hw,
            w_in: hw,
            h_out: out(0),
            w_out: out(1),
            kernel,
            stride,
            dilation: [1, 1],
            pads,
            kind,
        };
        let x = Rng::new(5).vec(c * hw * hw);
        let run = |threads: &Threads| {
            let mut y = vec![f32::NAN; c * p.h_out * p.w_out];
            threads.install(|| pool2d(&p, &x, &mut y));
            y
        };
        let one = run(&Threads::default());
        let two = Threads::new(2, 0).unwrap();
        assert_bits_eq(&run(&two), &one, &format!("{p:?}"));
        let overlapped = two.install(|| crate::pool::overlapped(&p, &x));
        assert_bits_eq(&overlapped, &one, &format!("overlapped {p:?}"));
    }
}

/// Runs of whole rows per thread: an attention's scores (12 × 128 rows of 128, the
/// last run short), log-softmax, the axis not innermost, and in place.
#[test]
fn softmax_rows_on_several_threads() {
    let cases = [
        (1536, 128, 1, false),
        (1000, 130, 1, true),
        (24, 64, 200, false),
    ];
    for (outer, len, inner, log) in cases {
        let p = Softmax {
            outer,
            len,
            inner,
            log,
        };
        let x = Rng::new(9).vec(outer * len * inner);
        let run = |threads: &Threads| {
            let mut y = vec![f32::NAN; x.len()];
            threads.install(|| softmax(&p, &x, &mut y));
            let mut z = x.clone();
            threads.install(|| softmax_inplace(&p, &mut z));
            assert_bits_eq(&z, &y, &format!("in place {p:?}"));
            y
        };
        let one = run(&Threads::default());
        assert_bits_eq(&run(&Threads::new(2, 0).unwrap()), &one, &format!("{p:?}"));
        assert_bits_eq(&run(&Threads::new(3, 0).unwrap()), &one, &format!("{p:?}"));
    }
}

#[test]
fn matmul_packed_split_by_bands_of_rows() {
    // Bands of whole 6-row blocks: 128 rows in two bands; 31 rows in a band of 18 and
    // one of 13, whose last block is short.
    for (i, (m, n, k)) in [(128, 70, 48), (31, 300, 40)].into_iter().enumerate() {
        let mut rng = Rng::new(120 + i as u64);
        let (a, b) = (rng.vec(m * k), rng.vec(k * n));
        let packed = pack_b(k, n, &b);
        let run = |threads: &Threads| {
            let mut y = vec![f32::NAN; m * n];
            threads.install(|| matmul_packed(&PackedMatMul { m, n, k }, &a, &packed, &mut y));
            y
        };
        let one = run(&Threads::default());
        let got = run(&Threads::new(2, 0).unwrap());
        let what = format!("packed {m}x{n}x{k} on 2 threads");
        assert_close(
            &got,
            &gemm_ref(&gemm_params(m, n, k), &a, &b, None),
            TOL,
            &what,
        );
        assert_bits_eq(&got, &one, &what);
    }
}

#[test]
fn gemm_split_by_rows_and_by_columns() {
    // m ≥ n splits rows; n > m splits columns in 24-wide tiles, with a ragged end.
    for (i, (m, n, k)) in [(300, 40, 70), (20, 1001, 64), (64, 64, 64)]
        .into_iter()
        .enumerate()
    {
        let p = Gemm {
            c_strides: [n, 1],
            activation: Activation::Relu,
            ..gemm_params(m, n, k)
        };
        let mut rng = Rng::new(90 + i as u64);
        let (a, b, c) = (rng.vec(m * k), rng.vec(k * n), rng.vec(m * n));
        let run = |threads: &Threads| {
            let mut y = vec![f32::NAN; m * n];
            threads.install(|| gemm(&p, &a, &b, Some(&c), &mut y));
            y
        };
        let one = run(&Threads::default());
        let threads = Threads::new(2, 0).unwrap();
        let got = run(&threads);
        let what = format!("{m}x{n}x{k} on 2 threads");
        assert_close(&got, &gemm_ref(&p, &a, &b, Some(&c)), TOL, &what);
        assert_bits_eq(&got, &one, &what);
    }
}
