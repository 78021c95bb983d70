//! Launch geometry: for each operator, the kernel, grid, block and scalar arguments of
//! its launches, computed from the same parameter structs the CPU kernels take.
//!
//! Every builder is a `const fn`, so generated code fixes its launches at compile time
//! (`const L: Launches = geometry::conv2d(&P);`), and the CPU emulator's tests call the
//! very same functions, so they check what the GPU will receive. The meaning of each
//! kernel's `ints` and `floats` is written above the kernel in `runtime-support/cuda/`;
//! [`extents`] decodes them back into the number of elements each tensor spans.
//!
//! Integer arguments are `i32`: the CUDA target handles tensors of at most `i32::MAX`
//! elements (the compiler rejects larger ones for it; a builder called with such a
//! shape panics, which in a `const` is a compile error of the generated module).
//! A step whose output is empty has no launch (`len == 0`): CUDA rejects empty grids.
//!
//! Tensor order in [`Ptrs`](super::Ptrs)`::inputs` is given per builder; unused slots
//! are `Ptr::Null`, and kernels never use `Ptrs::scratch` (convolution is an implicit
//! GEMM and needs none).

use super::launch::{Launch, Launches, MAX_FLOATS, MAX_INPUTS, MAX_INTS};
pub use super::sources::{SOURCES, source_of};
use crate::kernels::index::Layout;
use crate::params::{
    Activation, BatchNorm, Binary, Broadcast, ChannelAffine, Concat, Conv2d, Gemm, Lrn, MAX_RANK,
    MatMul, Pool2d, PoolKind, ReduceMean, Softmax, Transpose, Unary,
};

pub const CONV2D: &str = "kiln_conv2d";
pub const CONV2D_DEPTHWISE: &str = "kiln_conv2d_depthwise";
pub const GEMM: &str = "kiln_gemm";
pub const MATMUL: &str = "kiln_matmul";
pub const UNARY: &str = "kiln_unary";
pub const BINARY: &str = "kiln_binary";
pub const BATCH_NORM: &str = "kiln_batch_norm";
pub const CHANNEL_AFFINE: &str = "kiln_channel_affine";
pub const POOL2D: &str = "kiln_pool2d";
pub const REDUCE_MEAN: &str = "kiln_reduce_mean";
pub const LRN: &str = "kiln_lrn";
pub const SOFTMAX: &str = "kiln_softmax";
pub const TRANSPOSE: &str = "kiln_transpose";
pub const CONCAT_PART: &str = "kiln_concat_part";
pub const COPY: &str = "kiln_copy";

/// Every kernel the builders below can launch.
pub const KERNEL_NAMES: &[&str] = &[
    CONV2D,
    CONV2D_DEPTHWISE,
    GEMM,
    MATMUL,
    UNARY,
    BINARY,
    BATCH_NORM,
    CHANNEL_AFFINE,
    POOL2D,
    REDUCE_MEAN,
    LRN,
    SOFTMAX,
    TRANSPOSE,
    CONCAT_PART,
    COPY,
];

/// Threads per block of the one-thread-per-element kernels and of the GEMM tile
/// (`KILN_THREADS` in `kiln.cuh`).
pub const THREADS: u32 = 256;
/// Most blocks a grid-stride kernel is launched with; larger tensors loop.
pub const MAX_BLOCKS: usize = 4096;
/// Side of the GEMM kernels' output tile (`KILN_BM`, `KILN_BN` in `gemm.cu`).
pub const TILE: usize = 64;
/// Limit of `grid.y` and `grid.z` (the kernels loop past it).
pub const MAX_GRID_YZ: usize = 65535;

const NO_LAUNCH: Launch = Launch {
    kernel: "",
    grid: [0; 3],
    block: [0; 3],
    shared_bytes: 0,
    ints: [0; MAX_INTS],
    floats: [0.0; MAX_FLOATS],
};

/// No launch: the step's output is empty.
pub const NONE: Launches = Launches {
    len: 0,
    list: [NO_LAUNCH; 3],
};

const fn one(
    kernel: &'static str,
    grid: [u32; 3],
    block: u32,
    ints: [i32; MAX_INTS],
    floats: [f32; MAX_FLOATS],
) -> Launches {
    Launches {
        len: 1,
        list: [
            Launch {
                kernel,
                grid,
                block: [block, 1, 1],
                shared_bytes: 0,
                ints,
                floats,
            },
            NO_LAUNCH,
            NO_LAUNCH,
        ],
    }
}

/// `x` as a kernel's `int` argument.
const fn int(x: usize) -> i32 {
    assert!(
        x <= i32::MAX as usize,
        "the CUDA target handles tensors of at most i32::MAX elements"
    );
    x as i32
}

/// `dims` as the first scalar arguments of a launch, each checked by [`int`].
const fn ints_of(dims: &[usize]) -> [i32; MAX_INTS] {
    let mut ints = [0; MAX_INTS];
    let mut i = 0;
    while i < dims.len() {
        ints[i] = int(dims[i]);
        i += 1;
    }
    ints
}

const fn min(a: usize, b: usize) -> usize {
    if a < b { a } else { b }
}

/// Product of `xs[..n]`, checked against `i32::MAX`.
const fn product(xs: &[usize; MAX_RANK], n: usize) -> usize {
    let mut p = 1usize;
    let mut i = 0;
    while i < n {
        p = p.saturating_mul(xs[i]);
        i += 1;
    }
    int(p);
    p
}

/// A one-thread-per-element kernel over `len` outputs, grid-stride.
const fn elementwise(
    kernel: &'static str,
    len: usize,
    ints: [i32; MAX_INTS],
    floats: [f32; MAX_FLOATS],
) -> Launches {
    if len == 0 {
        return NONE;
    }
    int(len);
    let blocks = min(len.div_ceil(THREADS as usize), MAX_BLOCKS);
    one(kernel, [blocks as u32, 1, 1], THREADS, ints, floats)
}

/// Block size of the one-block-per-row kernels: a power of two from 32 to 256.
const fn row_block(len: usize) -> u32 {
    let b = if len <= 32 {
        32
    } else {
        len.next_power_of_two()
    };
    min(b, THREADS as usize) as u32
}

/// The `KILN_OP_*` code and parameters of a fused activation.
pub const fn activation_code(a: Activation) -> (i32, f32, f32) {
    match a {
        Activation::None => (0, 0.0, 0.0),
        Activation::Relu => (1, 0.0, 0.0),
        Activation::LeakyRelu { alpha } => (2, alpha, 0.0),
        Activation::Sigmoid => (3, 0.0, 0.0),
        Activation::Clip { min, max } => (5, min, max),
        Activation::HardSigmoid { alpha, beta } => (11, alpha, beta),
        Activation::HardSwish => (12, 0.0, 0.0),
        Activation::Swish { alpha } => (13, alpha, 0.0),
    }
}

/// The `KILN_OP_*` code and parameters of a unary operator.
pub const fn unary_code(op: Unary) -> (i32, f32, f32) {
    match op {
        Unary::Relu => (1, 0.0, 0.0),
        Unary::LeakyRelu { alpha } => (2, alpha, 0.0),
        Unary::Sigmoid => (3, 0.0, 0.0),
        Unary::Tanh => (4, 0.0, 0.0),
        Unary::Clip { min, max } => (5, min, max),
        Unary::Exp => (6, 0.0, 0.0),
        Unary::Neg => (7, 0.0, 0.0),
        Unary::Abs => (8, 0.0, 0.0),
        Unary::Sqrt => (9, 0.0, 0.0),
        Unary::Erf => (10, 0.0, 0.0),
        Unary::HardSigmoid { alpha, beta } => (11, alpha, beta),
        Unary::HardSwish => (12, 0.0, 0.0),
        Unary::Swish { alpha } => (13, alpha, 0.0),
        Unary::Gelu { tanh: false } => (14, 0.0, 0.0),
        Unary::Gelu { tanh: true } => (15, 0.0, 0.0),
    }
}

/// The `KILN_BIN_*` code of a binary operator.
pub const fn binary_code(op: Binary) -> i32 {
    match op {
        Binary::Add => 0,
        Binary::Sub => 1,
        Binary::Mul => 2,
        Binary::Div => 3,
        Binary::Max => 4,
        Binary::Min => 5,
    }
}

// Shapes are simplified with `Layout::simplify` over the inputs' strides only: the
// output is contiguous, so it merges wherever the inputs do, and the kernels do fewer
// divisions with the same offsets.

/// Writes `xs[..n]` into `ints[at..at + n]`.
const fn put(ints: &mut [i32; MAX_INTS], at: usize, xs: &[usize; MAX_RANK], n: usize) {
    let mut i = 0;
    while i < n {
        ints[at + i] = int(xs[i]);
        i += 1;
    }
}

/// Output length of one convolution axis (as the CPU kernel checks it).
const fn conv_out_len(
    in_len: usize,
    kernel: usize,
    stride: usize,
    dilation: usize,
    pads: usize,
) -> usize {
    let span = dilation * (kernel - 1) + 1;
    (in_len + pads).saturating_sub(span) / stride + 1
}

/// Conv: inputs `[x, w, bias or Null]` (the kernels add the bias when its pointer is
/// not null). Depthwise convolutions get a direct kernel,
/// everything else the implicit GEMM (one launch either way).
pub const fn conv2d(p: &Conv2d) -> Launches {
    assert!(
        p.group > 0 && p.c_in.is_multiple_of(p.group) && p.c_out.is_multiple_of(p.group),
        "conv2d: group must divide both channel counts"
    );
    assert!(
        p.kernel[0] > 0
            && p.kernel[1] > 0
            && p.stride[0] > 0
            && p.stride[1] > 0
            && p.dilation[0] > 0
            && p.dilation[1] > 0,
        "conv2d: empty kernel, stride or dilation"
    );
    assert!(
        p.h_out
            == conv_out_len(
                p.h_in,
                p.kernel[0],
                p.stride[0],
                p.dilation[0],
                p.pads[0] + p.pads[2]
            )
            && p.w_out
                == conv_out_len(
                    p.w_in,
                    p.kernel[1],
                    p.stride[1],
                    p.dilation[1],
                    p.pads[1] + p.pads[3]
                ),
        "conv2d: output size does not match the window"
    );
    let positions = p.h_out * p.w_out;
    let out_len = p.n * p.c_out * positions;
    if out_len == 0 {
        return NONE;
    }
    int(out_len);
    int(p.n * p.c_in * p.h_in * p.w_in);
    int(p.c_out * (p.c_in / p.group) * p.kernel[0] * p.kernel[1]);
    let (act, f0, f1) = activation_code(p.activation);
    let mut ints = ints_of(&[
        p.n,
        p.c_in,
        p.h_in,
        p.w_in,
        p.c_out,
        p.h_out,
        p.w_out,
        p.kernel[0],
        p.kernel[1],
        p.stride[0],
        p.stride[1],
        p.dilation[0],
        p.dilation[1],
        p.pads[0],
        p.pads[1],
        p.group,
    ]);
    ints[16] = act;
    ints[17] = p.is_pointwise() as i32;
    let floats = [f0, f1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
    if p.is_depthwise() {
        return elementwise(CONV2D_DEPTHWISE, out_len, ints, floats);
    }
    let grid = [
        positions.div_ceil(TILE) as u32,
        min((p.c_out / p.group).div_ceil(TILE), MAX_GRID_YZ) as u32,
        min(p.n * p.group, MAX_GRID_YZ) as u32,
    ];
    one(CONV2D, grid, THREADS, ints, floats)
}

/// Gemm: inputs `[a, b, c or Null]`; `has_c` says whether the step has a C (it is read
/// only when `p.beta != 0`, as on the CPU).
pub const fn gemm(p: &Gemm, has_c: bool) -> Launches {
    if p.m == 0 || p.n == 0 {
        return NONE;
    }
    int(p.m * p.n);
    int(p.m * p.k);
    int(p.k * p.n);
    let (act, f0, f1) = activation_code(p.activation);
    let mut ints = [0; MAX_INTS];
    ints[0] = int(p.m);
    ints[1] = int(p.n);
    ints[2] = int(p.k);
    ints[3] = p.trans_a as i32;
    ints[4] = p.trans_b as i32;
    ints[5] = has_c as i32;
    if has_c {
        int(1 + (p.m - 1) * p.c_strides[0] + (p.n - 1) * p.c_strides[1]);
        ints[6] = int(p.c_strides[0]);
        ints[7] = int(p.c_strides[1]);
    }
    ints[8] = act;
    let floats = [p.alpha, p.beta, f0, f1, 0.0, 0.0, 0.0, 0.0];
    let grid = [
        p.n.div_ceil(TILE) as u32,
        min(p.m.div_ceil(TILE), MAX_GRID_YZ) as u32,
        1,
    ];
    one(GEMM, grid, THREADS, ints, floats)
}

/// MatMul: inputs `[a, b]`, batch broadcasting through the batch strides.
pub const fn matmul(p: &MatMul) -> Launches {
    let batches = product(&p.batch_shape, p.batch_rank);
    if batches == 0 || p.m == 0 || p.n == 0 {
        return NONE;
    }
    int(batches * p.m * p.n);
    let s = Layout::simplify(
        p.batch_rank,
        &p.batch_shape,
        [&p.a_batch_strides, &p.b_batch_strides],
    );
    let mut ints = [0; MAX_INTS];
    ints[0] = int(p.m);
    ints[1] = int(p.n);
    ints[2] = int(p.k);
    ints[3] = s.rank as i32;
    put(&mut ints, 4, &s.shape, s.rank);
    put(&mut ints, 10, &s.strides[0], s.rank);
    put(&mut ints, 16, &s.strides[1], s.rank);
    ints[22] = int(batches);
    int(matrices(&s.shape, &s.strides[0], s.rank) * p.m * p.k);
    int(matrices(&s.shape, &s.strides[1], s.rank) * p.k * p.n);
    let grid = [
        p.n.div_ceil(TILE) as u32,
        min(p.m.div_ceil(TILE), MAX_GRID_YZ) as u32,
        min(batches, MAX_GRID_YZ) as u32,
    ];
    one(MATMUL, grid, THREADS, ints, [0.0; MAX_FLOATS])
}

/// Elements (or matrices) an operand with `strides` over `shape[..rank]` spans; the
/// shape has no zero dimension.
const fn matrices(shape: &[usize; MAX_RANK], strides: &[usize; MAX_RANK], rank: usize) -> usize {
    let mut n = 1usize;
    let mut d = 0;
    while d < rank {
        n = n.saturating_add((shape[d] - 1).saturating_mul(strides[d]));
        d += 1;
    }
    n
}

/// BatchNormalization (inference): inputs `[x, scale, bias, mean, var]`. May run in
/// place.
pub const fn batch_norm(p: &BatchNorm) -> Launches {
    let len = p.n * p.c * p.inner;
    let mut ints = [0; MAX_INTS];
    ints[0] = int(len);
    ints[1] = int(p.c);
    ints[2] = int(p.inner);
    elementwise(
        BATCH_NORM,
        len,
        ints,
        [p.epsilon, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    )
}

/// Per-channel affine with an activation: inputs `[x, scale, shift]`. May run in place.
pub const fn channel_affine(p: &ChannelAffine) -> Launches {
    let len = p.n * p.c * p.inner;
    let (act, f0, f1) = activation_code(p.activation);
    let mut ints = [0; MAX_INTS];
    ints[0] = int(len);
    ints[1] = int(p.c);
    ints[2] = int(p.inner);
    ints[3] = act;
    elementwise(
        CHANNEL_AFFINE,
        len,
        ints,
        [f0, f1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    )
}

/// Unary op over `len` elements: inputs `[x]`. May run in place.
pub const fn unary(op: Unary, len: usize) -> Launches {
    let (code, f0, f1) = unary_code(op);
    let mut ints = [0; MAX_INTS];
    ints[0] = int(len);
    ints[1] = code;
    elementwise(UNARY, len, ints, [f0, f1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
}

/// Broadcasting binary op: inputs `[a, b]`. May run in place (`out` = `a`, the
/// CPU's `binary_inplace`).
pub const fn binary(op: Binary, p: &Broadcast) -> Launches {
    let len = product(&p.shape, p.rank);
    if len == 0 {
        return NONE;
    }
    let s = Layout::simplify(p.rank, &p.shape, [&p.a_strides, &p.b_strides]);
    let mut ints = [0; MAX_INTS];
    ints[0] = binary_code(op);
    ints[1] = s.rank as i32;
    put(&mut ints, 2, &s.shape, s.rank);
    put(&mut ints, 8, &s.strides[0], s.rank);
    put(&mut ints, 14, &s.strides[1], s.rank);
    ints[20] = int(len);
    elementwise(BINARY, len, ints, [0.0; MAX_FLOATS])
}

/// MaxPool / AveragePool: inputs `[x]`.
pub const fn pool2d(p: &Pool2d) -> Launches {
    assert!(
        p.stride[0] > 0 && p.stride[1] > 0 && p.dilation[0] > 0 && p.dilation[1] > 0,
        "pool2d: zero stride or dilation"
    );
    let len = p.n * p.c * p.h_out * p.w_out;
    int(p.n * p.c * p.h_in * p.w_in);
    let mut ints = ints_of(&[
        p.n * p.c,
        p.h_in,
        p.w_in,
        p.h_out,
        p.w_out,
        p.kernel[0],
        p.kernel[1],
        p.stride[0],
        p.stride[1],
        p.dilation[0],
        p.dilation[1],
        p.pads[0],
        p.pads[1],
        p.pads[2],
        p.pads[3],
    ]);
    ints[15] = match p.kind {
        PoolKind::Max => 0,
        PoolKind::Average {
            count_include_pad: false,
        } => 1,
        PoolKind::Average {
            count_include_pad: true,
        } => 2,
    };
    elementwise(POOL2D, len, ints, [0.0; MAX_FLOATS])
}

/// Mean over the innermost axis: inputs `[x]`. One block per row.
pub const fn reduce_mean(p: &ReduceMean) -> Launches {
    if p.outer == 0 {
        return NONE;
    }
    int(p.outer * p.inner);
    let mut ints = [0; MAX_INTS];
    ints[0] = int(p.outer);
    ints[1] = int(p.inner);
    let scale = if p.inner == 0 {
        0.0
    } else {
        1.0 / p.inner as f32
    };
    let grid = [min(p.outer, MAX_GRID_YZ) as u32, 1, 1];
    one(
        REDUCE_MEAN,
        grid,
        row_block(p.inner),
        ints,
        [scale, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    )
}

/// LRN: inputs `[x]`. One thread per (image, position) over the channels; may run in
/// place when `p.size <= LRN_INPLACE_MAX_SIZE` (`KILN_LRN_MAX` in `norm.cu`).
pub const fn lrn(p: &Lrn) -> Launches {
    const _: () = assert!(crate::kernels::LRN_INPLACE_MAX_SIZE == 16, "KILN_LRN_MAX");
    assert!(p.size > 0, "lrn: size 0");
    let len = p.n * p.c * p.inner;
    if len == 0 {
        return NONE;
    }
    int(len);
    let mut ints = [0; MAX_INTS];
    ints[0] = int(p.n);
    ints[1] = int(p.c);
    ints[2] = int(p.inner);
    ints[3] = int((p.size - 1) / 2);
    ints[4] = int(p.size / 2);
    let k = p.alpha / p.size as f32;
    let floats = [k, p.beta, p.bias, 0.0, 0.0, 0.0, 0.0, 0.0];
    elementwise(LRN, p.n * p.inner, ints, floats)
}

/// Softmax or LogSoftmax: inputs `[x]`. One block per row; may run in place.
pub const fn softmax(p: &Softmax) -> Launches {
    let rows = p.outer * p.inner;
    if rows == 0 || p.len == 0 {
        return NONE;
    }
    int(rows * p.len);
    let mut ints = [0; MAX_INTS];
    ints[0] = int(rows);
    ints[1] = int(p.len);
    ints[2] = int(p.inner);
    ints[3] = p.log as i32;
    let grid = [min(rows, MAX_GRID_YZ) as u32, 1, 1];
    one(SOFTMAX, grid, row_block(p.len), ints, [0.0; MAX_FLOATS])
}

/// Transpose: inputs `[x]`.
pub const fn transpose(p: &Transpose) -> Launches {
    let rank = p.rank;
    assert!(rank <= MAX_RANK, "transpose: rank over MAX_RANK");
    let mut seen = [false; MAX_RANK];
    let mut i = 0;
    while i < rank {
        assert!(
            p.perm[i] < rank && !seen[p.perm[i]],
            "transpose: not a permutation"
        );
        seen[p.perm[i]] = true;
        i += 1;
    }
    let len = product(&p.in_shape, rank);
    let mut in_strides = [0; MAX_RANK];
    let mut step = 1;
    let mut d = rank;
    while d > 0 {
        d -= 1;
        in_strides[d] = step;
        step *= p.in_shape[d];
    }
    let (mut out_shape, mut src_strides) = ([1; MAX_RANK], [0; MAX_RANK]);
    let mut i = 0;
    while i < rank {
        out_shape[i] = p.in_shape[p.perm[i]];
        src_strides[i] = in_strides[p.perm[i]];
        i += 1;
    }
    let s = Layout::simplify(rank, &out_shape, [&src_strides]);
    let mut ints = [0; MAX_INTS];
    ints[0] = int(len);
    ints[1] = s.rank as i32;
    put(&mut ints, 2, &s.shape, s.rank);
    put(&mut ints, 8, &s.strides[0], s.rank);
    elementwise(TRANSPOSE, len, ints, [0.0; MAX_FLOATS])
}

/// Plain copy of `len` elements: inputs `[x]`.
pub const fn copy(len: usize) -> Launches {
    let mut ints = [0; MAX_INTS];
    ints[0] = int(len);
    elementwise(COPY, len, ints, [0.0; MAX_FLOATS])
}

/// One input of a Concat: inputs `[x_i]`, `p.outer` chunks of `chunk` elements each,
/// chunk `o` copied to element `at` of output chunk `o` (output chunks are `out_chunk`
/// elements: the sum of the inputs' chunks). A Concat is one such step per input.
pub const fn concat_part(p: &Concat, chunk: usize, out_chunk: usize, at: usize) -> Launches {
    assert!(
        at + chunk <= out_chunk,
        "concat_part: chunk past the output chunk"
    );
    int(p.outer * out_chunk);
    let mut ints = [0; MAX_INTS];
    ints[0] = int(p.outer);
    ints[1] = int(chunk);
    ints[2] = int(out_chunk);
    ints[3] = int(at);
    elementwise(CONCAT_PART, p.outer * chunk, ints, [0.0; MAX_FLOATS])
}

/// How many elements each tensor of a launch spans, decoded from its `ints`: what the
/// kernel may read (inputs) or write (`out`) from each pointer. Launchers check every
/// pointer's region against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extents {
    pub out: usize,
    pub inputs: [usize; MAX_INPUTS],
    /// Inputs the kernel skips when their pointer is null (a convolution's bias).
    pub optional: [bool; MAX_INPUTS],
}

/// The [`Extents`] of `l`, or `None` for a kernel not in [`KERNEL_NAMES`] or
/// arguments no builder here produces (negative, or overflowing).
pub fn extents(l: &Launch) -> Option<Extents> {
    let v = |i: usize| usize::try_from(l.ints[i]).ok();
    let mul = |xs: &[usize]| xs.iter().try_fold(1usize, |p, &x| p.checked_mul(x));
    // Elements spanned by strides over a shape (0 for an empty shape).
    let span = |shape: &[usize], strides: &[usize]| -> Option<usize> {
        if shape.contains(&0) {
            return Some(0);
        }
        shape
            .iter()
            .zip(strides)
            .try_fold(1usize, |n, (&s, &t)| n.checked_add((s - 1).checked_mul(t)?))
    };
    let all = |n: usize| [n; MAX_INPUTS];
    let e = |out: usize, inputs: [usize; MAX_INPUTS]| {
        Some(Extents {
            out,
            inputs,
            optional: [false; MAX_INPUTS],
        })
    };
    match l.kernel {
        CONV2D | CONV2D_DEPTHWISE => {
            let [n, c_in, h_in, w_in, c_out, h_out, w_out, kh, kw] =
                [0, 1, 2, 3, 4, 5, 6, 7, 8].map(v);
            let (n, c_in, h_in, w_in, c_out) = (n?, c_in?, h_in?, w_in?, c_out?);
            let (h_out, w_out, kh, kw, group) = (h_out?, w_out?, kh?, kw?, v(15)?);
            if group == 0 {
                return None;
            }
            // The depthwise kernel reads channel counts from C_in only.
            let c_out = if l.kernel == CONV2D { c_out } else { c_in };
            let x = mul(&[n, c_in, h_in, w_in])?;
            let w = mul(&[c_out, c_in / group, kh, kw])?;
            let mut ext = Extents {
                out: mul(&[n, c_out, h_out, w_out])?,
                inputs: [x, w, c_out, 0, 0],
                optional: [false; MAX_INPUTS],
            };
            ext.optional[2] = true;
            Some(ext)
        }
        GEMM => {
            let (m, n, k, has_c) = (v(0)?, v(1)?, v(2)?, l.ints[5] != 0);
            let c = if has_c {
                span(&[m, n], &[v(6)?, v(7)?])?
            } else {
                0
            };
            e(mul(&[m, n])?, [mul(&[m, k])?, mul(&[k, n])?, c, 0, 0])
        }
        MATMUL => {
            let (m, n, k, rank, batches) = (v(0)?, v(1)?, v(2)?, v(3)?, v(22)?);
            if rank > MAX_RANK {
                return None;
            }
            let shape: Vec<usize> = (0..rank).map(|d| v(4 + d)).collect::<Option<_>>()?;
            let sa: Vec<usize> = (0..rank).map(|d| v(10 + d)).collect::<Option<_>>()?;
            let sb: Vec<usize> = (0..rank).map(|d| v(16 + d)).collect::<Option<_>>()?;
            if mul(&shape)? != batches {
                return None;
            }
            let a = span(&shape, &sa)?.checked_mul(mul(&[m, k])?)?;
            let b = span(&shape, &sb)?.checked_mul(mul(&[k, n])?)?;
            e(mul(&[batches, m, n])?, [a, b, 0, 0, 0])
        }
        UNARY | COPY | TRANSPOSE => {
            let len = v(0)?;
            if l.kernel == TRANSPOSE {
                let rank = v(1)?;
                if rank > MAX_RANK {
                    return None;
                }
                let shape: Vec<usize> = (0..rank).map(|d| v(2 + d)).collect::<Option<_>>()?;
                let strides: Vec<usize> = (0..rank).map(|d| v(8 + d)).collect::<Option<_>>()?;
                if mul(&shape)? != len || span(&shape, &strides)? > len {
                    return None;
                }
            }
            e(len, [len, 0, 0, 0, 0])
        }
        BINARY => {
            let (rank, len) = (v(1)?, v(20)?);
            if rank > MAX_RANK {
                return None;
            }
            let shape: Vec<usize> = (0..rank).map(|d| v(2 + d)).collect::<Option<_>>()?;
            let sa: Vec<usize> = (0..rank).map(|d| v(8 + d)).collect::<Option<_>>()?;
            let sb: Vec<usize> = (0..rank).map(|d| v(14 + d)).collect::<Option<_>>()?;
            if mul(&shape)? != len {
                return None;
            }
            e(len, [span(&shape, &sa)?, span(&shape, &sb)?, 0, 0, 0])
        }
        BATCH_NORM | CHANNEL_AFFINE => {
            let (len, c, inner) = (v(0)?, v(1)?, v(2)?);
            if c == 0 || inner == 0 {
                return (len == 0).then_some(Extents {
                    out: 0,
                    inputs: all(0),
                    optional: [false; MAX_INPUTS],
                });
            }
            let count = if l.kernel == BATCH_NORM { 5 } else { 3 };
            let mut inputs = all(0);
            inputs[0] = len;
            for x in &mut inputs[1..count] {
                *x = c;
            }
            e(len, inputs)
        }
        POOL2D => {
            let (planes, h_in, w_in, h_out, w_out) = (v(0)?, v(1)?, v(2)?, v(3)?, v(4)?);
            e(
                mul(&[planes, h_out, w_out])?,
                [mul(&[planes, h_in, w_in])?, 0, 0, 0, 0],
            )
        }
        REDUCE_MEAN => {
            let (outer, inner) = (v(0)?, v(1)?);
            e(outer, [mul(&[outer, inner])?, 0, 0, 0, 0])
        }
        LRN => {
            let len = mul(&[v(0)?, v(1)?, v(2)?])?;
            e(len, [len, 0, 0, 0, 0])
        }
        SOFTMAX => {
            let (rows, len, inner) = (v(0)?, v(1)?, v(2)?);
            if inner == 0 || rows % inner != 0 {
                return None;
            }
            let total = mul(&[rows, len])?;
            e(total, [total, 0, 0, 0, 0])
        }
        CONCAT_PART => {
            let (outer, chunk, out_chunk, at) = (v(0)?, v(1)?, v(2)?, v(3)?);
            let len = mul(&[outer, chunk])?;
            let out = if len == 0 {
                0
            } else {
                (outer - 1)
                    .checked_mul(out_chunk)?
                    .checked_add(at)?
                    .checked_add(chunk)?
            };
            e(out, [len, 0, 0, 0, 0])
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Builders are usable in constants, as generated code uses them.
    const RELU: Launches = unary(Unary::Relu, 1000);

    #[test]
    fn builders_are_const_and_grids_cover_the_data() {
        let l = RELU.as_slice()[0];
        assert_eq!(l.kernel, UNARY);
        assert_eq!(l.grid, [4, 1, 1]);
        assert_eq!(l.block, [THREADS, 1, 1]);
        assert_eq!(unary(Unary::Relu, 0).len, 0);
        let big = copy(1 << 30).as_slice()[0];
        assert_eq!(big.grid[0] as usize, MAX_BLOCKS);
    }

    #[test]
    fn large_products_stay_inside_grid_limits() {
        let g = Gemm {
            m: 70_000 * 64,
            n: 3,
            k: 2,
            trans_a: false,
            trans_b: false,
            alpha: 1.0,
            beta: 0.0,
            c_strides: [0, 0],
            activation: Activation::None,
        };
        let l = gemm(&g, false).as_slice()[0];
        assert_eq!(l.grid, [1, MAX_GRID_YZ as u32, 1]);
        let mut shape = [1; MAX_RANK];
        shape[0] = 100_000;
        let m = MatMul {
            m: 2,
            n: 2,
            k: 2,
            batch_rank: 1,
            batch_shape: shape,
            a_batch_strides: [1, 0, 0, 0, 0, 0],
            b_batch_strides: [0; MAX_RANK],
        };
        let l = matmul(&m).as_slice()[0];
        assert_eq!(l.grid[2] as usize, MAX_GRID_YZ);
        assert_eq!(l.ints[22], 100_000);
    }

    #[test]
    fn simplification_merges_contiguous_dimensions() {
        // [2, 1, 3, 4] + [1, 1, 3, 4]: one run of 12 broadcast over 2.
        let mut p = Broadcast {
            rank: 4,
            shape: [2, 1, 3, 4, 1, 1],
            a_strides: [12, 12, 4, 1, 0, 0],
            b_strides: [0, 0, 4, 1, 0, 0],
        };
        let l = binary(Binary::Add, &p).as_slice()[0];
        assert_eq!(l.ints[1], 2);
        assert_eq!(&l.ints[2..4], &[2, 12]);
        assert_eq!(&l.ints[8..10], &[12, 1]);
        assert_eq!(&l.ints[14..16], &[0, 1]);
        p.rank = 0;
        let l = binary(Binary::Add, &p).as_slice()[0];
        assert_eq!((l.ints[1], l.ints[20]), (0, 1));
    }

    #[test]
    fn extents_match_the_tensors() {
        let p = Conv2d {
            n: 2,
            c_in: 4,
            h_in: 5,
            w_in: 6,
            c_out: 6,
            h_out: 5,
            w_out: 6,
            kernel: [3, 3],
            stride: [1, 1],
            dilation: [1, 1],
            pads: [1, 1, 1, 1],
            group: 2,
            activation: Activation::Relu,
        };
        let e = extents(&conv2d(&p).as_slice()[0]).unwrap();
        assert_eq!(e.out, 2 * 6 * 30);
        assert_eq!(e.inputs, [2 * 4 * 30, 6 * 2 * 9, 6, 0, 0]);
        assert!(e.optional[2]);
        let c = concat_part(&Concat { outer: 3 }, 4, 10, 6).as_slice()[0];
        assert_eq!(extents(&c).unwrap().out, 2 * 10 + 6 + 4);
        let mut bad = c;
        bad.ints[1] = -1;
        assert_eq!(extents(&bad), None);
        bad.kernel = "kiln_nothing";
        assert_eq!(extents(&bad), None);
    }
}
