use kiln_runtime::kernels::{
    conv2d, conv2d_max_pool, conv2d_residual, conv2d_residual_inplace, conv2d_shuffled, pool2d,
};
use kiln_runtime::params::{Activation, Conv2d, Pool2d, PoolKind};

use crate::reference::{ACTIVATIONS, Rng, activation_ref, assert_close};

/// Accumulation error of an f32 dot product of a few thousand terms, relative.
const TOL: f32 = 1e-4;

/// Builds a `Conv2d` with the ONNX output size.
#[allow(clippy::too_many_arguments)]
pub(crate) fn params(
    n: usize,
    c_in: usize,
    hw_in: [usize; 2],
    c_out: usize,
    kernel: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
    pads: [usize; 4],
    group: usize,
) -> Conv2d {
    let out = |i: usize| {
        (hw_in[i] + pads[i] + pads[i + 2] - dilation[i] * (kernel[i] - 1) - 1) / stride[i] + 1
    };
    Conv2d {
        n,
        c_in,
        h_in: hw_in[0],
        w_in: hw_in[1],
        c_out,
        h_out: out(0),
        w_out: out(1),
        kernel,
        stride,
        dilation,
        pads,
        group,
        activation: Activation::None,
    }
}

/// Direct convolution in f64, one output element at a time.
pub(crate) fn conv_ref(p: &Conv2d, x: &[f32], w: &[f32], bias: Option<&[f32]>) -> Vec<f32> {
    let (cig, cog) = (p.c_in / p.group, p.c_out / p.group);
    let [kh, kw] = p.kernel;
    let mut y = vec![0.0; p.n * p.c_out * p.h_out * p.w_out];
    for n in 0..p.n {
        for co in 0..p.c_out {
            let g = co / cog;
            for oh in 0..p.h_out {
                for ow in 0..p.w_out {
                    let mut acc = bias.map_or(0.0, |b| b[co] as f64);
                    for ci in 0..cig {
                        let c = g * cig + ci;
                        for ki in 0..kh {
                            for kj in 0..kw {
                                let ih = (oh * p.stride[0] + ki * p.dilation[0]) as isize
                                    - p.pads[0] as isize;
                                let iw = (ow * p.stride[1] + kj * p.dilation[1]) as isize
                                    - p.pads[1] as isize;
                                if ih < 0
                                    || iw < 0
                                    || ih >= p.h_in as isize
                                    || iw >= p.w_in as isize
                                {
                                    continue;
                                }
                                let xv = x[((n * p.c_in + c) * p.h_in + ih as usize) * p.w_in
                                    + iw as usize];
                                let wv = w[((co * cig + ci) * kh + ki) * kw + kj];
                                acc += xv as f64 * wv as f64;
                            }
                        }
                    }
                    let out = ((n * p.c_out + co) * p.h_out + oh) * p.w_out + ow;
                    y[out] = activation_ref(p.activation, acc as f32);
                }
            }
        }
    }
    y
}

/// Runs `conv2d` and the reference on random data, with and without bias.
fn check(p: Conv2d, seed: u64) {
    let mut rng = Rng::new(seed);
    let x = rng.vec(p.n * p.c_in * p.h_in * p.w_in);
    let w = rng.vec(p.c_out * p.c_in / p.group * p.kernel[0] * p.kernel[1]);
    let b = rng.vec(p.c_out);
    for bias in [Some(&b[..]), None] {
        let mut y = vec![f32::NAN; p.n * p.c_out * p.h_out * p.w_out];
        let mut scratch = vec![f32::NAN; p.scratch_len()];
        conv2d(&p, &x, &w, bias, &mut y, &mut scratch);
        let want = conv_ref(&p, &x, &w, bias);
        assert_close(&y, &want, TOL, &format!("{p:?} bias {}", bias.is_some()));
    }
}

#[test]
fn pointwise() {
    let p = params(2, 3, [7, 9], 5, [1, 1], [1, 1], [1, 1], [0; 4], 1);
    assert!(p.is_pointwise());
    check(p, 1);
    check(
        params(1, 255, [3, 5], 257, [1, 1], [1, 1], [1, 1], [0; 4], 1),
        2,
    );
    check(
        params(1, 1, [1, 1], 1, [1, 1], [1, 1], [1, 1], [0; 4], 1),
        3,
    );
}

/// Every width of the columns taken as dot products (1 to 7 past whole vectors, after
/// whole panels and after half of one), output channels that leave partial row
/// blocks (and partial groups of rows within the dot products), input channels in
/// several packed runs and a partial vector of them, planes in several blocks, and
/// no input channels at all (the bias alone). One or two columns alone are streamed
/// a row at a time with several accumulators along the input channels: 45, 77 and
/// 1030 of them reach every step of that loop (unrolled, single vectors, partial).
/// Inputs of over 1 MiB, whose next block is fetched while one is multiplied.
#[test]
fn pointwise_blocks_and_tails() {
    for (i, (c_in, hw, c_out)) in [
        (9, [1, 1], 7),
        (45, [1, 1], 10),
        (1030, [1, 1], 5),
        (16, [1, 2], 13),
        (77, [1, 2], 9),
        (17, [1, 3], 6),
        (33, [2, 2], 11),
        (8, [1, 5], 17),
        (40, [2, 3], 5),
        (7, [1, 7], 19),
        (24, [7, 7], 20),
        (64, [14, 14], 25),
        (20, [13, 13], 31),
        (3, [5, 5], 2),
        (600, [7, 7], 14),
        (1030, [3, 5], 9),
        (12, [40, 40], 8),
        (0, [3, 3], 4),
        // Inputs over 1 MiB, fetched ahead a block at a time, and a run at a time.
        (300, [40, 40], 20),
        (600, [24, 24], 10),
    ]
    .into_iter()
    .enumerate()
    {
        check(
            params(1, c_in, hw, c_out, [1, 1], [1, 1], [1, 1], [0; 4], 1),
            100 + i as u64,
        );
    }
}

#[test]
fn pointwise_grouped() {
    check(
        params(2, 4, [5, 3], 6, [1, 1], [1, 1], [1, 1], [0; 4], 2),
        4,
    );
}

#[test]
fn three_by_three_same_padding() {
    check(
        params(1, 3, [11, 13], 4, [3, 3], [1, 1], [1, 1], [1; 4], 1),
        5,
    );
    check(
        params(2, 16, [8, 8], 8, [3, 3], [1, 1], [1, 1], [1; 4], 1),
        6,
    );
}

#[test]
fn stride_dilation_asymmetric_pads() {
    let p = params(2, 3, [10, 9], 5, [3, 2], [2, 2], [2, 1], [0, 1, 2, 1], 1);
    check(p, 7);
    check(
        params(1, 2, [9, 12], 3, [2, 3], [3, 2], [1, 3], [2, 0, 1, 3], 1),
        8,
    );
}

#[test]
fn strided_and_padded_one_by_one() {
    // Neither is pointwise: both go through im2col.
    let strided = params(1, 8, [9, 7], 6, [1, 1], [2, 2], [1, 1], [0; 4], 1);
    assert!(!strided.is_pointwise());
    check(strided, 9);
    check(
        params(1, 3, [4, 5], 2, [1, 1], [1, 1], [1, 1], [1, 0, 0, 2], 1),
        10,
    );
}

/// im2col's panels of 16 positions across breaks between output rows (gathered
/// position by position, those in the padding zero), at strides 2 and 1, up to the
/// plane's last rows. The 3×3 stride-2 layers of ResNet break most of their panels.
#[test]
fn im2col_panels_across_rows() {
    for (i, p) in [
        params(1, 40, [15, 23], 48, [3, 3], [2, 2], [1, 1], [1; 4], 1),
        params(1, 40, [13, 13], 40, [3, 3], [2, 2], [1, 1], [0, 1, 1, 0], 1),
        params(2, 36, [14, 14], 36, [3, 3], [2, 2], [1, 1], [1; 4], 1),
        params(1, 6, [9, 11], 5, [5, 5], [1, 1], [1, 1], [2; 4], 1),
    ]
    .into_iter()
    .enumerate()
    {
        assert!(!p.direct_applies() && !p.is_pointwise(), "{p:?}");
        check(p, 90 + i as u64);
    }
}

#[test]
fn stem_like_seven_by_seven() {
    check(
        params(1, 3, [17, 17], 8, [7, 7], [2, 2], [1, 1], [3; 4], 1),
        11,
    );
}

#[test]
fn kernel_covers_input() {
    check(
        params(1, 4, [5, 3], 3, [5, 3], [1, 1], [1, 1], [0; 4], 1),
        12,
    );
}

#[test]
fn grouped() {
    check(
        params(2, 6, [6, 7], 9, [3, 3], [1, 1], [1, 1], [1; 4], 3),
        13,
    );
    // Depthwise with a channel multiplier is grouped, not depthwise.
    let p = params(1, 4, [6, 5], 8, [3, 3], [2, 1], [1, 1], [1, 1, 0, 1], 4);
    assert!(!p.is_depthwise());
    check(p, 14);
}

#[test]
fn depthwise() {
    // Padded: each plane is copied inside a zero border in the scratch.
    let p = params(2, 5, [9, 11], 5, [3, 3], [1, 1], [1, 1], [1; 4], 5);
    assert!(p.is_depthwise() && p.scratch_len() > 0);
    check(p, 15);
    // Unpadded.
    let p = params(1, 3, [9, 11], 3, [3, 3], [1, 1], [1, 1], [0; 4], 3);
    assert!(p.is_depthwise());
    check(p, 18);
    // Stride 3 with dilation 2 (phases 0, 2, 1 for the three kernel columns), and a
    // kernel wider than the input.
    check(
        params(1, 2, [8, 23], 2, [3, 3], [1, 3], [2, 2], [1, 2, 0, 1], 2),
        39,
    );
    check(
        params(1, 2, [3, 4], 2, [1, 9], [1, 1], [1, 1], [0, 4, 0, 4], 2),
        40,
    );
    // Rows narrower than a block (7×7 with a 5×5 kernel, a late stage).
    let p = params(1, 4, [7, 7], 4, [5, 5], [1, 1], [1, 1], [2; 4], 4);
    check(p, 19);
    check(
        params(1, 7, [13, 10], 7, [5, 3], [2, 2], [2, 1], [3, 0, 1, 2], 7),
        16,
    );
    check(
        params(1, 3, [1, 1], 3, [3, 3], [1, 1], [1, 1], [1; 4], 3),
        17,
    );
    check(
        params(1, 2, [4, 4], 2, [2, 2], [3, 3], [1, 1], [0; 4], 2),
        18,
    );
    // Rows wide enough for several 8-output register blocks, plus edges.
    check(
        params(2, 3, [6, 41], 3, [3, 3], [1, 1], [1, 1], [1; 4], 3),
        34,
    );
    check(
        params(1, 3, [7, 53], 3, [3, 5], [2, 2], [1, 2], [1, 3, 0, 2], 3),
        35,
    );
    check(
        params(1, 2, [5, 30], 2, [1, 7], [1, 3], [1, 1], [0, 0, 0, 6], 2),
        36,
    );
    // Whole blocks of eight channels (interleaved by 8×8 shuffles), a partial block
    // after them (13, 21 channels), batches, rows with and without a partial tile of
    // outputs and of interleaved inputs, each window the kernel has constants for
    // (3×3, 5×5, 7×7 at strides 1 and 2) and some it has not.
    check(
        params(1, 8, [16, 16], 8, [3, 3], [1, 1], [1, 1], [1; 4], 8),
        41,
    );
    check(
        params(2, 13, [11, 19], 13, [3, 3], [2, 2], [1, 1], [1; 4], 13),
        42,
    );
    check(
        params(1, 16, [14, 14], 16, [5, 5], [1, 1], [1, 1], [2; 4], 16),
        43,
    );
    check(
        params(
            2,
            24,
            [15, 29],
            24,
            [5, 5],
            [2, 2],
            [1, 1],
            [2, 1, 2, 2],
            24,
        ),
        44,
    );
    check(
        params(1, 21, [9, 26], 21, [7, 7], [1, 1], [1, 1], [3; 4], 21),
        45,
    );
    check(
        params(1, 8, [17, 40], 8, [7, 7], [2, 2], [1, 1], [3; 4], 8),
        46,
    );
    check(
        params(1, 16, [7, 7], 16, [5, 5], [1, 1], [1, 1], [2; 4], 16),
        47,
    );
    check(
        params(
            1,
            16,
            [12, 33],
            16,
            [3, 3],
            [1, 3],
            [2, 2],
            [2, 0, 2, 1],
            16,
        ),
        48,
    );
    check(
        params(1, 9, [10, 12], 9, [1, 1], [2, 1], [1, 1], [0; 4], 9),
        49,
    );
    // Rows of several groups of independent blocks, then single blocks and a partial
    // one: stride 1 (100 = 3·32 + 4) and stride 2 (75 = 2·32 + 11).
    check(
        params(1, 2, [4, 100], 2, [3, 3], [1, 1], [1, 1], [1; 4], 2),
        37,
    );
    check(
        params(1, 2, [5, 150], 2, [3, 3], [2, 2], [1, 1], [1; 4], 2),
        38,
    );
}

#[test]
fn wide_channels_odd() {
    check(
        params(1, 255, [5, 5], 257, [3, 3], [1, 1], [1, 1], [1; 4], 1),
        19,
    );
}

#[test]
fn fused_activations() {
    for (i, act) in ACTIVATIONS.into_iter().enumerate() {
        let shapes = [
            params(1, 4, [5, 6], 3, [3, 3], [1, 1], [1, 1], [1; 4], 1),
            params(1, 4, [5, 6], 3, [1, 1], [1, 1], [1, 1], [0; 4], 1),
            params(1, 4, [5, 6], 4, [3, 3], [2, 1], [1, 1], [1; 4], 4),
            // Depthwise, a whole block of channels and a partial one: the activation
            // in registers, or over the finished row (Sigmoid, Swish).
            params(1, 12, [9, 11], 12, [3, 3], [1, 1], [1, 1], [1; 4], 12),
        ];
        for p in shapes {
            check(
                Conv2d {
                    activation: act,
                    ..p
                },
                20 + i as u64,
            );
        }
    }
}

/// The direct kernel: full and partial blocks of output channels (8, 13, 3), strides
/// 1 and 2, uneven pads, rows with and without a partial tile, batches, planes
/// narrower than a tile, one input channel and the most it takes.
#[test]
fn direct() {
    let cases = [
        params(1, 3, [17, 20], 16, [3, 3], [2, 2], [1, 1], [1; 4], 1),
        params(2, 5, [9, 11], 13, [3, 3], [1, 1], [1, 1], [1; 4], 1),
        params(1, 1, [12, 7], 3, [3, 3], [2, 2], [1, 1], [0, 1, 1, 0], 1),
        params(1, 32, [10, 10], 8, [3, 3], [1, 1], [1, 1], [0; 4], 1),
        params(1, 16, [21, 33], 24, [3, 3], [2, 2], [1, 1], [1, 0, 0, 1], 1),
        params(1, 4, [2, 3], 9, [3, 3], [1, 1], [1, 1], [2; 4], 1),
        // Many input channels, few output channels (DenseNet's 128→32).
        params(1, 128, [9, 10], 32, [3, 3], [1, 1], [1, 1], [1; 4], 1),
        params(1, 72, [11, 9], 20, [3, 3], [2, 2], [1, 1], [1, 0, 1, 0], 1),
    ];
    for (i, p) in cases.into_iter().enumerate() {
        assert!(p.direct_applies(), "{p:?}");
        check(p, 60 + i as u64);
    }
    // A 7×7 stem at stride 2 over 3 channels, with a partial tile and a padded row.
    let stem = params(1, 3, [37, 29], 20, [7, 7], [2, 2], [1, 1], [3, 3, 3, 2], 1);
    assert!(stem.direct_applies());
    check(
        Conv2d {
            activation: Activation::Relu,
            ..stem
        },
        70,
    );
    check(
        params(2, 1, [15, 16], 8, [7, 7], [2, 2], [1, 1], [0; 4], 1),
        71,
    );
    // Two blocks at once (stride 2) on rows narrower than their tile (5 positions at
    // 7×7, 6 at 3×3) and on a row of 9, whose last tile is shifted back over the
    // first; and a row of 7 at stride 1. Then four blocks at once (stride 2, where
    // the CPU has AVX-512's registers), and what is left after them taken two and
    // one at a time: 8 blocks, 7 (4 + 2 + 1), 5 at 7×7 (4 + 1), and 60 channels (a
    // partial last block among four). At stride 1 with AVX-512's sixteen lanes, 6
    // blocks (4 + 2) on a row of 21 (its last tile shifted back), with a partial last
    // block; and two blocks there (one vector a position, tiles of 10 with the window's
    // columns unrolled) on rows of 23 and of exactly 10, the second with a partial
    // block.
    for (i, p) in [
        params(1, 3, [11, 12], 16, [7, 7], [2, 2], [1, 1], [0; 4], 1),
        params(1, 2, [6, 7], 16, [3, 3], [2, 2], [1, 1], [0, 1, 0, 0], 1),
        params(1, 3, [9, 19], 16, [3, 3], [2, 2], [1, 1], [0; 4], 1),
        params(1, 3, [8, 9], 16, [3, 3], [1, 1], [1, 1], [0; 4], 1),
        params(1, 32, [19, 23], 64, [3, 3], [2, 2], [1, 1], [1; 4], 1),
        params(1, 8, [13, 17], 56, [3, 3], [2, 2], [1, 1], [1, 0, 0, 1], 1),
        params(1, 3, [23, 21], 40, [7, 7], [2, 2], [1, 1], [3; 4], 1),
        params(2, 5, [12, 11], 60, [3, 3], [2, 2], [1, 1], [1; 4], 1),
        params(1, 16, [13, 21], 44, [3, 3], [1, 1], [1, 1], [1; 4], 1),
        params(1, 5, [7, 23], 16, [3, 3], [1, 1], [1, 1], [1; 4], 1),
        params(1, 2, [5, 10], 12, [3, 3], [1, 1], [1, 1], [1, 0, 1, 0], 1),
    ]
    .into_iter()
    .enumerate()
    {
        assert!(p.direct_applies(), "{p:?}");
        check(p, 72 + i as u64);
    }
    // Neither a 5×5 window, a 7×7 one at stride 1 or over 5 channels, nor 33 input
    // channels with 40 output channels, nor 32 output channels whose weights do not
    // fit.
    assert!(!params(1, 3, [9, 9], 8, [5, 5], [1, 1], [1, 1], [0; 4], 1).direct_applies());
    assert!(!params(1, 3, [9, 9], 8, [7, 7], [1, 1], [1, 1], [0; 4], 1).direct_applies());
    assert!(!params(1, 5, [19, 19], 8, [7, 7], [2, 2], [1, 1], [0; 4], 1).direct_applies());
    assert!(!params(1, 33, [9, 9], 40, [3, 3], [1, 1], [1, 1], [0; 4], 1).direct_applies());
    assert!(!params(1, 256, [9, 9], 32, [3, 3], [1, 1], [1, 1], [0; 4], 1).direct_applies());
}

/// Image stems of at most 4 input channels whose rows hold a vector, which take the
/// kernel with positions as the lanes where the CPU has sixteen lanes (`stem.rs`; the
/// direct kernel elsewhere): both strides, 3×3 and 7×7, rows of exactly a vector, of
/// a vector and a part and of several tiles, even and odd left pads, a batch, and
/// activations with and without a vector form.
#[test]
fn stems() {
    let cases = [
        params(1, 3, [40, 38], 16, [3, 3], [2, 2], [1, 1], [1; 4], 1),
        params(2, 3, [33, 33], 8, [3, 3], [2, 2], [1, 1], [0; 4], 1),
        params(1, 4, [20, 33], 12, [3, 3], [1, 1], [1, 1], [1; 4], 1),
        params(1, 1, [18, 18], 4, [3, 3], [1, 1], [1, 1], [1, 0, 1, 0], 1),
        params(1, 3, [45, 50], 24, [7, 7], [2, 2], [1, 1], [3; 4], 1),
        params(1, 2, [17, 230], 20, [3, 3], [2, 2], [1, 1], [1, 0, 0, 1], 1),
    ];
    let activations = [
        Activation::None,
        Activation::HardSwish,
        Activation::Swish { alpha: 1.0 },
    ];
    for (i, p) in cases.into_iter().enumerate() {
        assert!(p.direct_applies() && p.w_out >= 16, "{p:?}");
        for (j, activation) in activations.into_iter().enumerate() {
            check(Conv2d { activation, ..p }, 200 + 3 * i as u64 + j as u64);
        }
    }
}

/// A max pool over `p`'s output (`[top, left, bottom, right]` pads), its output
/// sizes rounded up under `ceil` (ONNX `ceil_mode`, a last window past the pads).
pub(crate) fn max_pool_of(
    p: &Conv2d,
    kernel: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
    pads: [usize; 4],
    ceil: bool,
) -> Pool2d {
    let out = |i: usize| {
        let in_len = [p.h_out, p.w_out][i] + pads[i] + pads[i + 2];
        let span = dilation[i] * (kernel[i] - 1) + 1;
        let steps = (in_len - span) as f64 / stride[i] as f64;
        (if ceil { steps.ceil() } else { steps.floor() }) as usize + 1
    };
    Pool2d {
        kind: PoolKind::Max,
        n: p.n,
        c: p.c_out,
        h_in: p.h_out,
        w_in: p.w_out,
        h_out: out(0),
        w_out: out(1),
        kernel,
        stride,
        dilation,
        pads,
    }
}

/// `conv2d` then `pool2d`, the two steps the fused kernel replaces.
pub(crate) fn conv_then_pool(
    p: &Conv2d,
    pool: &Pool2d,
    x: &[f32],
    w: &[f32],
    b: &[f32],
) -> Vec<f32> {
    let mut conv = vec![f32::NAN; p.n * p.c_out * p.h_out * p.w_out];
    conv2d(
        p,
        x,
        w,
        Some(b),
        &mut conv,
        &mut vec![f32::NAN; p.scratch_len()],
    );
    let mut y = vec![f32::NAN; pool.n * pool.c * pool.h_out * pool.w_out];
    pool2d(pool, &conv, &mut y);
    y
}

/// The direct kernel with the max pool after it fused in gives the bits of the two
/// steps apart (the convolution's rows are the same sums, and a max is exact):
/// SqueezeNet's stem (3×3 s2, then 3×3 s2 unpadded), ResNet's (7×7 s2, then 3×3 s2
/// padded), ShuffleNet's 24 channels (a partial block at 20), `ceil_mode` windows past
/// the pads, a dilated pool, a stride-1 pool as large as its input, 2×2 at stride 2,
/// two images, and activations with and without a vector form, applied after the
/// maximum where they never decrease (a maximum of activated values is the activated
/// maximum) and before it where they do not.
#[test]
fn direct_then_max_pool() {
    let cases = [
        (
            params(1, 3, [45, 47], 64, [3, 3], [2, 2], [1, 1], [0; 4], 1),
            [3, 3],
            [2, 2],
            [1, 1],
            [0; 4],
            false,
        ),
        (
            params(1, 3, [40, 38], 24, [7, 7], [2, 2], [1, 1], [3; 4], 1),
            [3, 3],
            [2, 2],
            [1, 1],
            [1; 4],
            false,
        ),
        (
            params(2, 3, [33, 30], 20, [3, 3], [2, 2], [1, 1], [1; 4], 1),
            [3, 3],
            [2, 2],
            [1, 1],
            [1, 0, 1, 0],
            true,
        ),
        (
            params(1, 16, [19, 23], 13, [3, 3], [1, 1], [1, 1], [1; 4], 1),
            [3, 3],
            [1, 1],
            [1, 1],
            [1; 4],
            false,
        ),
        (
            params(1, 5, [20, 26], 9, [3, 3], [1, 1], [1, 1], [0; 4], 1),
            [2, 2],
            [2, 2],
            [1, 1],
            [0; 4],
            true,
        ),
        (
            params(1, 4, [25, 25], 16, [3, 3], [2, 2], [1, 1], [1; 4], 1),
            [3, 2],
            [2, 3],
            [2, 1],
            [2, 1, 0, 1],
            false,
        ),
        (
            params(1, 2, [9, 5], 8, [3, 3], [1, 1], [1, 1], [1; 4], 1),
            [3, 3],
            [2, 2],
            [1, 1],
            [1; 4],
            true,
        ),
    ];
    // Those that never decrease are applied to the pooled values, the others
    // (HardSwish) to the convolution's: either way as the reference, bit for bit.
    let activations = [
        Activation::None,
        Activation::Relu,
        Activation::Sigmoid,
        Activation::LeakyRelu { alpha: 0.1 },
        Activation::Clip {
            min: -0.5,
            max: 0.5,
        },
        Activation::HardSwish,
    ];
    for (i, (conv, kernel, stride, dilation, pads, ceil)) in cases.into_iter().enumerate() {
        let pool = max_pool_of(&conv, kernel, stride, dilation, pads, ceil);
        let mut rng = Rng::new(90 + i as u64);
        let x = rng.vec(conv.n * conv.c_in * conv.h_in * conv.w_in);
        let w = rng.vec(conv.c_out * conv.c_in * conv.kernel[0] * conv.kernel[1]);
        let b = rng.vec(conv.c_out);
        for activation in activations {
            let p = Conv2d { activation, ..conv };
            assert!(p.direct_applies(), "{p:?}");
            let want = conv_then_pool(&p, &pool, &x, &w, &b);
            let mut y = vec![f32::NAN; want.len()];
            let mut scratch = vec![f32::NAN; p.max_pool_scratch_len(&pool)];
            conv2d_max_pool(&p, &pool, &x, &w, Some(&b), &mut y, &mut scratch);
            crate::reference::assert_bits_eq(&y, &want, &format!("{p:?} then {pool:?}"));
        }
    }
}

/// A pool that does not take the convolution's output, or an average, is refused.
#[test]
#[should_panic(expected = "does not pool")]
fn max_pool_of_another_shape_is_refused() {
    let p = params(1, 3, [20, 20], 8, [3, 3], [2, 2], [1, 1], [0; 4], 1);
    let pool = Pool2d {
        kind: PoolKind::Average {
            count_include_pad: false,
        },
        ..max_pool_of(&p, [3, 3], [2, 2], [1, 1], [0; 4], false)
    };
    let mut y = vec![0.0; pool.c * pool.h_out * pool.w_out];
    let x = vec![0.0; 3 * 400];
    let w = vec![0.0; 8 * 27];
    let mut scratch = vec![0.0; p.max_pool_scratch_len(&pool)];
    conv2d_max_pool(&p, &pool, &x, &w, None, &mut y, &mut scratch);
}

/// Batches of images with few positions each, unfolded several at a time into one
/// product: a group of images and a partial one, a 1-D STFT-like layer (silero VAD's:
/// 258 filters of 256 taps at stride 128, 4 positions an image), with an activation;
/// and the same layer given only the scratch one image needs, which runs it image by
/// image (as a build over ranges may lend it).
#[test]
fn images_at_once() {
    let p = params(5, 6, [3, 4], 7, [2, 3], [1, 1], [1, 1], [1; 4], 1);
    assert_eq!(p.conv_images_at_once(48), Some(3));
    assert!(p.scratch_len() > p.least_scratch_len());
    check(p, 50);
    let stft = params(16, 1, [1, 640], 258, [1, 256], [1, 128], [1, 1], [0; 4], 1);
    assert_eq!(stft.conv_images_at_once(48), Some(12));
    check(stft, 51);
    check(
        Conv2d {
            activation: Activation::Relu,
            ..params(3, 4, [1, 9], 5, [1, 3], [1, 2], [1, 1], [0, 1, 0, 1], 1)
        },
        52,
    );
    check_least_scratch(&p, 53, "one image at a time");
}

/// [`check`] given only `p.least_scratch_len()` (as a build over ranges may lend it),
/// without a bias.
fn check_least_scratch(p: &Conv2d, seed: u64, what: &str) {
    let mut rng = Rng::new(seed);
    let x = rng.vec(p.n * p.c_in * p.h_in * p.w_in);
    let w = rng.vec(p.c_out * p.c_in / p.group * p.kernel[0] * p.kernel[1]);
    let mut y = vec![f32::NAN; p.n * p.c_out * p.h_out * p.w_out];
    let mut scratch = vec![f32::NAN; p.least_scratch_len()];
    conv2d(p, &x, &w, None, &mut y, &mut scratch);
    assert_close(
        &y,
        &conv_ref(p, &x, &w, None),
        TOL,
        &format!("{what}: {p:?}"),
    );
}

/// `act(conv(x, w) + bias + r)` in f64: the reference for `conv2d_residual`.
pub(crate) fn conv_residual_ref(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    r: &[f32],
) -> Vec<f32> {
    let plain = Conv2d {
        activation: Activation::None,
        ..*p
    };
    let y = conv_ref(&plain, x, w, bias);
    y.iter()
        .zip(r)
        .map(|(&y, &r)| activation_ref(p.activation, (y as f64 + r as f64) as f32))
        .collect()
}

/// `conv2d_residual` on every strategy `conv2d` has (pointwise, strided 1×1 and 3×3
/// through im2col in one block and in several, grouped, images at once, and the
/// direct and depthwise kernels, which add the residual after), with and without a
/// bias, under activations applied in the output stage, in registers and over rows;
/// and `conv2d_residual_inplace` on the strategies it takes.
#[test]
fn residual() {
    let cases = [
        params(1, 8, [7, 7], 16, [1, 1], [1, 1], [1, 1], [0; 4], 1),
        params(1, 8, [20, 30], 5, [1, 1], [1, 1], [1, 1], [0; 4], 1),
        // 300 output channels: the plane's products in two bands of columns.
        params(1, 8, [30, 30], 300, [1, 1], [1, 1], [1, 1], [0; 4], 1),
        params(1, 8, [9, 9], 12, [1, 1], [2, 2], [1, 1], [0; 4], 1),
        params(1, 40, [12, 13], 40, [3, 3], [1, 1], [1, 1], [1; 4], 1),
        // A 7×7 output: its 49th position alone in the last panel.
        params(1, 40, [14, 14], 40, [3, 3], [2, 2], [1, 1], [1; 4], 1),
        params(2, 4, [5, 6], 4, [3, 3], [2, 1], [1, 1], [1; 4], 2),
        // Grouped 1×1 (ShuffleNet's before its unit's Sum).
        params(1, 8, [7, 7], 12, [1, 1], [1, 1], [1, 1], [0; 4], 4),
        params(5, 6, [3, 4], 7, [2, 3], [1, 1], [1, 1], [1; 4], 1),
        params(1, 3, [17, 20], 16, [3, 3], [2, 2], [1, 1], [1; 4], 1),
        params(1, 12, [9, 11], 12, [3, 3], [1, 1], [1, 1], [1; 4], 12),
    ];
    let activations = [Activation::None, Activation::Relu, Activation::Sigmoid];
    for (i, base) in cases.into_iter().enumerate() {
        for act in activations {
            let p = Conv2d {
                activation: act,
                ..base
            };
            let mut rng = Rng::new(70 + i as u64);
            let x = rng.vec(p.n * p.c_in * p.h_in * p.w_in);
            let w = rng.vec(p.c_out * p.c_in / p.group * p.kernel[0] * p.kernel[1]);
            let b = rng.vec(p.c_out);
            let r = rng.vec(p.n * p.c_out * p.h_out * p.w_out);
            for bias in [Some(&b[..]), None] {
                let mut y = vec![f32::NAN; r.len()];
                let mut scratch = vec![f32::NAN; p.scratch_len()];
                conv2d_residual(&p, &x, &w, bias, &r, &mut y, &mut scratch);
                let want = conv_residual_ref(&p, &x, &w, bias, &r);
                assert_close(&y, &want, TOL, &format!("{p:?} bias {}", bias.is_some()));
                if p.is_depthwise() || p.direct_applies() {
                    continue;
                }
                // The residual in the output, the products accumulating onto it.
                let mut y = r.clone();
                conv2d_residual_inplace(&p, &x, &w, bias, &mut y, &mut scratch);
                let what = format!("{p:?} in place, bias {}", bias.is_some());
                assert_close(&y, &want, TOL, &what);
            }
        }
    }
}

/// A grouped convolution writing its output in channel-shuffle order: channel `a` of
/// group `b` at channel `a·g + b` of each image, against the reference's output moved
/// there. Pointwise (ShuffleNet's layers, one block or several, threads or not) and
/// 3×3 (im2col), with batches (each image's groups apart: the images-at-once strategy
/// takes one-group layers only).
#[test]
fn shuffled() {
    let cases = [
        params(1, 24, [56, 56], 112, [1, 1], [1, 1], [1, 1], [0; 4], 4),
        params(1, 136, [14, 14], 136, [1, 1], [1, 1], [1, 1], [0; 4], 4),
        params(2, 8, [5, 3], 6, [1, 1], [1, 1], [1, 1], [0; 4], 2),
        params(3, 6, [4, 5], 9, [3, 3], [1, 1], [1, 1], [1; 4], 3),
        // A channel multiplier: grouped, not depthwise.
        params(1, 4, [6, 5], 8, [3, 3], [2, 1], [1, 1], [1, 1, 0, 1], 4),
    ];
    let threads = kiln_runtime::Threads::new(2, cases[0].scratch_len() * 4).unwrap();
    for (i, base) in cases.into_iter().enumerate() {
        let p = Conv2d {
            activation: Activation::Relu,
            ..base
        };
        let mut rng = Rng::new(90 + i as u64);
        let x = rng.vec(p.n * p.c_in * p.h_in * p.w_in);
        let w = rng.vec(p.c_out * p.c_in / p.group * p.kernel[0] * p.kernel[1]);
        let b = rng.vec(p.c_out);
        let plain = conv_ref(&p, &x, &w, Some(&b));
        let (plane, per_group) = (p.h_out * p.w_out, p.c_out / p.group);
        let mut want = vec![f32::NAN; plain.len()];
        for (image, out) in plain.chunks_exact(p.c_out * plane).enumerate() {
            for (c, channel) in out.chunks_exact(plane).enumerate() {
                let to = c % per_group * p.group + c / per_group;
                want[(image * p.c_out + to) * plane..][..plane].copy_from_slice(channel);
            }
        }
        for pool in [None, Some(&threads)] {
            let mut y = vec![f32::NAN; want.len()];
            let mut scratch = vec![f32::NAN; p.scratch_len()];
            let mut run = || conv2d_shuffled(&p, &x, &w, Some(&b), &mut y, &mut scratch);
            match pool {
                Some(t) => t.install(run),
                None => run(),
            }
            let what = format!("{p:?}, {} threads", pool.map_or(1, |t| t.count()));
            assert_close(&y, &want, TOL, &what);
        }
    }
}

#[test]
#[should_panic(expected = "conv2d_shuffled: a grouped layer that is not depthwise")]
fn shuffled_refuses_a_depthwise_layer() {
    let p = params(1, 4, [5, 5], 4, [3, 3], [1, 1], [1, 1], [1; 4], 4);
    let (x, w) = (vec![0.0; 100], vec![0.0; 36]);
    let mut y = vec![0.0; 100];
    let mut scratch = vec![0.0; p.scratch_len()];
    conv2d_shuffled(&p, &x, &w, None, &mut y, &mut scratch);
}

#[test]
#[should_panic(expected = "conv2d_residual_inplace: a pointwise or im2col layer")]
fn residual_in_place_refuses_the_direct_kernel() {
    let p = params(1, 3, [9, 9], 8, [3, 3], [1, 1], [1, 1], [1; 4], 1);
    let (x, w) = (vec![0.0; 243], vec![0.0; 216]);
    let mut y = vec![0.0; 8 * 81];
    let mut scratch = vec![0.0; p.scratch_len()];
    conv2d_residual_inplace(&p, &x, &w, None, &mut y, &mut scratch);
}

#[test]
#[should_panic(expected = "conv2d_residual: residual")]
fn residual_of_another_shape_is_refused() {
    let p = params(1, 2, [4, 4], 2, [1, 1], [1, 1], [1, 1], [0; 4], 1);
    let (x, w) = (vec![0.0; 32], vec![0.0; 4]);
    let mut y = vec![0.0; 32];
    conv2d_residual(&p, &x, &w, None, &[0.0; 31], &mut y, &mut []);
}

#[test]
#[should_panic(expected = "conv2d: scratch")]
fn rejects_wrong_scratch() {
    let p = params(1, 2, [4, 4], 2, [3, 3], [1, 1], [1, 1], [1; 4], 1);
    let (x, w) = (vec![0.0; 32], vec![0.0; 36]);
    let mut y = vec![0.0; 32];
    conv2d(
        &p,
        &x,
        &w,
        None,
        &mut y,
        &mut vec![0.0; p.scratch_len() - 1],
    );
}

/// A plane of at most 256 positions whose product `k` would split into two column
/// blocks runs as one where the scratch holds it, and as two given only the least
/// scratch (as a build over ranges may lend it): a 14×14 pointwise layer past 128
/// input channels, the same with its input channels in two packed runs, and a 3×2
/// window over 100 channels (600 rows of unfolded windows, two runs). A larger plane
/// plans no more than its least.
#[test]
fn one_block_where_the_scratch_holds_it() {
    let cases = [
        params(1, 200, [14, 14], 20, [1, 1], [1, 1], [1, 1], [0; 4], 1),
        params(1, 600, [14, 14], 9, [1, 1], [1, 1], [1, 1], [0; 4], 1),
        params(1, 100, [13, 15], 7, [3, 2], [1, 1], [1, 1], [1; 4], 1),
    ];
    for (i, p) in cases.into_iter().enumerate() {
        assert!(p.scratch_len() > p.least_scratch_len(), "{p:?}");
        check(p, 60 + i as u64);
        check_least_scratch(&p, 70 + i as u64, "two blocks");
    }
    let large = params(1, 200, [17, 16], 20, [1, 1], [1, 1], [1, 1], [0; 4], 1);
    assert_eq!(large.scratch_len(), large.least_scratch_len());
}

/// Depthwise planes with rows narrower than a block, or output rows not whole
/// blocks, are interleaved whole where the scratch holds them and row by row given
/// only the least scratch (as a build over ranges may lend it): 7×7 and 14×14 at
/// stride 1, a stride-2 layer whose output rows are narrow, a partial block of
/// channels; a plane too large to stay in L1 plans no more than its least.
#[test]
fn depthwise_planes_where_the_scratch_holds_them() {
    let cases = [
        params(1, 16, [7, 7], 16, [5, 5], [1, 1], [1, 1], [2; 4], 16),
        params(2, 24, [14, 14], 24, [3, 3], [1, 1], [1, 1], [1; 4], 24),
        params(1, 16, [14, 13], 16, [5, 5], [2, 2], [1, 1], [2; 4], 16),
        params(1, 11, [6, 5], 11, [3, 3], [1, 1], [1, 1], [1; 4], 11),
    ];
    for (i, p) in cases.into_iter().enumerate() {
        assert!(
            p.is_depthwise() && p.scratch_len() > p.least_scratch_len(),
            "{p:?}"
        );
        check(p, 80 + i as u64);
        check_least_scratch(&p, 90 + i as u64, "row by row");
    }
    let large = params(1, 8, [40, 30], 8, [3, 3], [1, 1], [1, 1], [1; 4], 8);
    assert_eq!(large.scratch_len(), large.least_scratch_len());
}

/// Outputs wide enough for several blocks of positions, with blocks starting and
/// ending inside output rows.
#[test]
fn many_blocks() {
    check(
        params(2, 5, [23, 19], 7, [3, 3], [1, 1], [1, 1], [1; 4], 1),
        30,
    );
    check(
        params(1, 3, [41, 37], 4, [3, 2], [2, 1], [2, 3], [1, 2, 0, 1], 1),
        31,
    );
    check(
        params(2, 6, [30, 30], 4, [1, 1], [1, 1], [1, 1], [0; 4], 2),
        32,
    );
    check(
        params(1, 2, [100, 3], 3, [5, 1], [1, 1], [1, 1], [2, 0, 2, 0], 1),
        33,
    );
}

/// ConvTranspose over matrix products, row by row, against the typed kernel's
/// element-by-element gather (f64 sums): strides, dilations, pads, groups, taps
/// that overlap (kernel wider than the stride) and taps that fall outside.
#[test]
fn conv_transpose_rows_matches_the_gather() {
    use kiln_runtime::typed::params::{ConvGeom, ConvTransposeNd, RANK};
    use kiln_runtime::typed::{conv_transpose, conv_transpose_rows};
    // (n, c_in, c_out, group, in [h, w], kernel, strides, dilations, pads begin, out)
    #[allow(clippy::type_complexity)]
    let cases: [(
        usize,
        usize,
        usize,
        usize,
        [usize; 2],
        [usize; 2],
        [usize; 2],
        [usize; 2],
        [isize; 2],
        [usize; 2],
    ); 5] = [
        // PP-OCR's DB head: kernel = stride, no overlap.
        (1, 6, 6, 1, [5, 7], [2, 2], [2, 2], [1, 1], [0, 0], [10, 14]),
        // Overlapping 3x3 taps at stride 2, pads 1 (output 2·in − 1).
        (2, 4, 3, 1, [4, 5], [3, 3], [2, 2], [1, 1], [1, 1], [7, 9]),
        // Groups, dilation, uneven strides.
        (1, 4, 6, 2, [3, 4], [2, 3], [1, 2], [2, 1], [0, 1], [5, 8]),
        // Pads that cut taps off both edges.
        (1, 3, 2, 1, [3, 3], [5, 5], [1, 1], [1, 1], [2, 2], [3, 3]),
        // One column.
        (1, 2, 2, 1, [4, 1], [3, 1], [1, 1], [1, 1], [0, 0], [6, 1]),
    ];
    for (i, &(n, c_in, c_out, group, hw, k, s, d, pads, out)) in cases.iter().enumerate() {
        let arr = |v: [usize; 2]| {
            let mut a = [1; RANK];
            a[..2].copy_from_slice(&v);
            a
        };
        let mut pad_arr = [0; RANK];
        pad_arr[..2].copy_from_slice(&pads);
        let p = ConvTransposeNd {
            geom: ConvGeom {
                n,
                c_in,
                c_out,
                group,
                dims: 2,
                in_shape: arr(hw),
                out_shape: arr(out),
                kernel: arr(k),
                strides: arr(s),
                dilations: arr(d),
                pads: pad_arr,
            },
        };
        let mut rng = Rng::new(40 + i as u64);
        let x = rng.vec(n * c_in * hw[0] * hw[1]);
        let w = rng.vec(c_in * (c_out / group) * k[0] * k[1]);
        let b = rng.vec(c_out);
        let len = n * c_out * out[0] * out[1];
        let mut want = vec![0.0f32; len];
        conv_transpose(&p, &x, &w, &b, &mut want);
        let mut got = vec![f32::NAN; len];
        let mut scratch = vec![f32::NAN; p.rows_scratch_len()];
        conv_transpose_rows(&p, &x, &w, &b, &mut got, &mut scratch);
        assert_close(&got, &want, TOL, &format!("case {i}: {p:?}"));
    }
}
