//! Kernel parameters, shared by the compiler (which fills them at compile time and
//! emits them as constants) and the kernels (which read them at run time).
//!
//! Every struct is plain data with `const`-constructible public fields, so generated code
//! can write `const P: Conv2d = Conv2d { .. };`. Lengths are in `f32` elements.

/// Channels the depthwise kernel computes together, interleaved (one AVX2 vector).
pub const DEPTHWISE_BLOCK: usize = 8;

/// Most output positions of a row the depthwise kernel computes at once: its rows
/// are sized for whole tiles of this many.
pub const DEPTHWISE_TILE: usize = 8;

/// Most weights a layer may have to run as a direct convolution
/// ([`Conv2d::direct_applies`]): they are packed into its scratch each call.
pub const DIRECT_MAX_WEIGHTS: usize = 1 << 16;

/// Most input channels a layer may have to run as a direct convolution: with more,
/// im2col's unfolding is small beside its product, and the direct kernel (one
/// broadcast load per multiply-add vector) was slower (measured on one Zen 4 core,
/// direct against im2col: YOLOv8n's 3→16 s2 at 320² 0.58 against 0.77 ms, 16→16 at
/// 80² 0.35 against 0.55, 32→32 at 40² 0.32 against 0.43, 32→64 s2 at 80² 0.79
/// against 0.77; 64→128 s2 at 40² 0.90 against 0.69).
pub const DIRECT_MAX_CHANNELS_IN: usize = 32;

/// Most output channels a 3×3 layer with more input channels than
/// [`DIRECT_MAX_CHANNELS_IN`] may have to run as a direct convolution (its weights
/// within [`DIRECT_MAX_WEIGHTS`]): so narrow an output leaves Winograd's 16 products
/// and im2col's product too few rows to run at speed. Measured in cycles on one Zen 4
/// core, direct against the kernel it replaced: DenseNet's 128→32 at 56² 0.75× of
/// Winograd, at 28² 0.99×, at 14² 0.90×, at 7² 0.81×; 200→32 at 14² 0.93×; 96→32 at
/// 28² 0.98×; 64→32 at 56² 1.04×; 48→32 at 28² 0.81× of im2col, 128→24 at 28² 0.80×,
/// 64→16 at 56² 0.59×, 64→32 s2 at 56² 0.92×. With 64 output channels Winograd wins
/// (64→64 at 28²: direct 1.25×).
pub const DIRECT_MAX_CHANNELS_OUT: usize = 32;

/// Most input channels of a 7×7 stride-2 layer (an image network's stem) that runs as a
/// direct convolution. Measured on one Zen 4 core, direct against im2col: ResNet-50's
/// 3→64 at 224² 3.17 against 3.59 ms; with more input channels im2col is as fast or
/// faster (32→64 s2 at 56² 2.43 against 2.45, 16→32 s1 at 56² 2.94 against 2.53).
pub const DIRECT_STEM_MAX_CHANNELS_IN: usize = 4;

/// Tiles the Winograd kernel transforms together.
pub const WINOGRAD_LANES: usize = 8;

/// Floats of space after each of a Winograd block's matrices (see the kernel's `SKEW`).
pub const WINOGRAD_SKEW: usize = 16;

/// The most bands of output channels a Winograd layer of one block is shared in
/// among threads (see `kernels::conv2d_winograd`); its scratch holds a matrix skew
/// for each.
pub const WINOGRAD_MAX_BANDS: usize = 8;

/// The most tiles of a Winograd block ([`Conv2d::winograd_block`]).
pub const WINOGRAD_MAX_BLOCK: usize = 96;

/// Least input channels for which a 3×3 convolution runs as Winograd in a build over
/// declared ranges ([`Conv2d::winograd_applies`]), where only the channels may decide:
/// each product sums over the input channels alone, and the transforms cost the same
/// for every output channel whatever their count, so with few input channels im2col
/// is faster on some planes (measured on one Zen 4 core before the transforms took
/// tiles across rows:
/// SqueezeNet's 32→128 at 27×27 0.78× and 48→192 at 13×13 0.92× im2col's speed;
/// 64→64 at 56×56 1.3×, 256→256 at 56×56 1.85×).
pub const WINOGRAD_MIN_CHANNELS_IN: usize = 64;

/// Least input channels for which a 3×3 stride-1 convolution runs as Winograd where
/// the shape may decide ([`Conv2d::winograd_variant`]), ahead of the direct kernel
/// and of im2col alike. Times (one Zen 4 core, `runtime-support/examples`-style
/// probe, 1.0 = the kernel it replaces) with F(4×4) from 16 tiles: 128→32 at 14²
/// 0.66, 32→128 at 14² 0.61, 32→64 at 40² 0.79, 64→32 at 40² 0.78, 32→128 at 27²
/// 0.72, 24→24 at 56² 0.89; with F(2×2) below 16 tiles: 128→32 at 7² 0.85, 32→128 at
/// 7² 0.84, 64→32 at 7² 0.94, 48→192 at 7² 0.94 (im2col), 128→32 at 5² 1.0. With 16
/// to 31 input channels, F(4×4) against the direct kernel, alternated in one process:
/// 16→64 at 55² 0.64, 16→32 at 80² 0.64, 16→32 at 160² 0.65, 24→64 at 56² 0.52,
/// 16→64 at 28² 0.57, 16→48 at 14² 0.60, 16→16 at 80² 0.78, 16→16 at 40² 0.87;
/// F(2×2) on 16→32 at 7² 1.0. (An earlier 1.31 for 16→64 at 55², which had set the
/// bound at 32, does not reproduce.)
pub const WINOGRAD_BY_SHAPE_MIN_CHANNELS_IN: usize = 16;

/// Most input channels of a 3×3 stride-1 layer that runs as Winograd by its shape
/// ([`Conv2d::winograd_variant`]) for which the direct kernel is the faster where the
/// CPU does sixteen-lane multiply-adds at full rate, and slower where it has eight or
/// splits sixteen in two halves (Zen 4): such a layer carries its raw
/// weights beside the transformed ones, and the kernel takes one or the other at run
/// time ([`Conv2d::direct_rivals_winograd`], `kernels::conv2d_winograd_or_direct`).
/// One Zen 5 core, F(4×4) against the direct kernel at sixteen lanes: 16→64 at 55²
/// with ReLU 0.346 against 0.266 ms, 16→16 at 80² 0.193 against 0.185, 16→32 at 80²
/// 0.316 against 0.26; SqueezeNet 1.1 (two 16→64 layers at 55²) 3.66 → 3.43 ms. At
/// eight lanes the direct kernel took 0.48 ms where F(4×4) took 0.32 (16→64 at 55²),
/// and with 24 input channels or more it loses at sixteen lanes too. One Zen 4 core
/// (AVX-512 as two halves, the direct kernel's multiply-adds at that core's peak),
/// the direct kernel against F(4×4), alternated: 16→64 at 55² 0.563 against 0.423
/// ms, 16→64 at 28² 0.168 against 0.109, 16→16 at 80² 0.300 against 0.264, 16→32 at
/// 80² 0.583 against 0.444, at 160² 2.41 against 1.97; SqueezeNet 1.1 6.25 → 5.95 ms.
pub const DIRECT_RIVAL_MAX_CHANNELS_IN: usize = 16;

/// Least output channels for Winograd where the shape may decide
/// ([`Conv2d::winograd_variant`]).
pub const WINOGRAD_BY_SHAPE_MIN_CHANNELS_OUT: usize = 16;

/// Least output channels for Winograd; with no more than
/// [`DIRECT_MAX_CHANNELS_OUT`], the direct kernel takes the layer where its weights fit.
pub const WINOGRAD_MIN_CHANNELS_OUT: usize = 32;

/// The most floats a Winograd block's transformed input and products take together
/// (256 KiB), where the layer's transformed weights are no more:
/// [`Conv2d::winograd_block`] takes fewer tiles for wide layers to stay within it. The
/// scratch was part of the arena's peak on Inception v1/v2; twice this for every layer
/// (blocks twice as wide, up to 1.4× faster on 128 channels at 112×112) once took their
/// arenas from 0.71/0.85 to 0.78/0.93 of the liveness bound, and took SqueezeNet's
/// from 0.64 to 0.73 (its 16→64 layers at 55², whose weights are few).
pub const WINOGRAD_BLOCK_FLOATS: usize = 1 << 16;

/// The most floats a Winograd block's region takes where the layer's transformed
/// weights are more than [`WINOGRAD_BLOCK_FLOATS`]: as many as the weights, up to this
/// (512 KiB). Every block reads all of the weights, so where they outweigh the region
/// fewer, larger blocks read less; in a model they come from L3 or memory, not L2.
/// One Zen 5 core, yolov8n_nudenet_320 (alternated builds, min of 2 profiled rounds),
/// against 256 KiB: 64→64 F(4×4) at 40² 0.48 → 0.40 ms (four layers), 128→128 F(2×2)
/// at 10² 0.166 → 0.128 (four), 128→64 F(4×4) at 20² 0.265 → 0.23, 256→64 F(2×2) at
/// 10² 0.197 → 0.167; per-layer sum 10.81 → 10.17 ms.
pub const WINOGRAD_BLOCK_FLOATS_MAX: usize = 1 << 17;

/// Least F(4×4) tiles (4×4 outputs each) for which a Winograd layer runs as
/// F(4×4, 3×3) ([`Conv2d::winograd`]) rather than F(2×2, 3×3): 2.25 multiply-adds an
/// output against 4, and fewer transformed values, but 36 matrices of weights where
/// F(2×2) has 16, each read for a block's tiles, and tiles that overrun a side not a
/// multiple of 4 by more. Measured in cycles on one Zen 4 core, F(4×4) against
/// F(2×2): 64→64 at 56² 0.87×, 128→128 at 28² 0.73×, 256→256 at 14² 0.74×, 64→256 and
/// 128→128 at 13² (16 tiles) 0.69× and 0.79×, 64→64 at 20² 0.93×; with 9 tiles
/// 128→128 at 12² 1.05×, 128→128 at 10² 1.15×, 256→64 at 10² 1.27×; 512→512 at 7²
/// (4 tiles) 2.4×.
pub const WINOGRAD_F4_MIN_TILES: usize = 16;

/// A Winograd minimal filtering of 3×3 windows at stride 1 (`kernels::conv2d_winograd`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Winograd {
    /// F(2×2, 3×3): 2×2 output tiles from 4×4 input patches, 16 products.
    F2,
    /// F(4×4, 3×3): 4×4 output tiles from 6×6 input patches, 36 products.
    F4,
}

impl Winograd {
    /// Outputs per tile side.
    pub const fn tile(self) -> usize {
        match self {
            Self::F2 => 2,
            Self::F4 => 4,
        }
    }

    /// Input patch side: the tile and the window's overhang.
    pub const fn patch(self) -> usize {
        self.tile() + 2
    }

    /// Elementwise products per tile (and matrix products per block).
    pub const fn products(self) -> usize {
        self.patch() * self.patch()
    }
}

/// Highest tensor rank the broadcasting and transposing kernels handle.
pub const MAX_RANK: usize = 6;

/// An activation fused into the output stage of a producing kernel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Activation {
    None,
    Relu,
    LeakyRelu {
        alpha: f32,
    },
    Clip {
        min: f32,
        max: f32,
    },
    Sigmoid,
    /// `max(0, min(1, alpha·x + beta))`.
    HardSigmoid {
        alpha: f32,
        beta: f32,
    },
    /// `x · max(0, min(1, x/6 + 1/2))`.
    HardSwish,
    /// `x · sigmoid(alpha · x)` (SiLU at alpha = 1: YOLO's `x * Sigmoid(x)`).
    Swish {
        alpha: f32,
    },
}

impl Activation {
    /// Whether the activation never decreases (`x ≤ y` gives `f(x) ≤ f(y)`), so that it
    /// commutes with a maximum: a max pool may then apply it to its pooled values
    /// instead of to every value it pools. HardSwish and Swish dip below zero before
    /// they rise, and do not.
    pub fn is_monotonic(&self) -> bool {
        match *self {
            Activation::None | Activation::Relu | Activation::Clip { .. } | Activation::Sigmoid => {
                true
            }
            Activation::LeakyRelu { alpha } | Activation::HardSigmoid { alpha, .. } => alpha >= 0.0,
            Activation::HardSwish | Activation::Swish { .. } => false,
        }
    }
}

/// 2-D convolution over NCHW, weights OIHW (ONNX layout), optional bias of length
/// `c_out`, optional fused activation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Conv2d {
    pub n: usize,
    pub c_in: usize,
    pub h_in: usize,
    pub w_in: usize,
    pub c_out: usize,
    pub h_out: usize,
    pub w_out: usize,
    /// `[kh, kw]`
    pub kernel: [usize; 2],
    /// `[sh, sw]`
    pub stride: [usize; 2],
    /// `[dh, dw]`
    pub dilation: [usize; 2],
    /// `[top, left, bottom, right]`
    pub pads: [usize; 4],
    pub group: usize,
    pub activation: Activation,
}

/// `Y = alpha * op(A) * op(B) + beta * C`, with `C` broadcast through strides.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gemm {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub trans_a: bool,
    pub trans_b: bool,
    pub alpha: f32,
    pub beta: f32,
    /// Element strides of `C` over `[row, column]` of `Y`; 0 where `C` is broadcast.
    pub c_strides: [usize; 2],
    pub activation: Activation,
}

/// Batched matrix product with NumPy broadcasting over the batch dimensions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatMul {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// Number of batch dimensions used in the arrays below.
    pub batch_rank: usize,
    pub batch_shape: [usize; MAX_RANK],
    /// Strides of A and B over the batch dimensions, in whole matrices; 0 where broadcast.
    pub a_batch_strides: [usize; MAX_RANK],
    pub b_batch_strides: [usize; MAX_RANK],
}

/// `Y = A · B` with B a constant the compiler packed (`kernels::pack_b`): A is `m × k`
/// row-major (a batch of matrices back to back is one taller A), Y `m × n`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PackedMatMul {
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

/// How two operands map onto the output of an elementwise op: the output shape and
/// each operand's element strides (0 along broadcast dimensions). The compiler merges
/// adjacent dimensions first, so most calls have rank 1 or 2.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Broadcast {
    pub rank: usize,
    pub shape: [usize; MAX_RANK],
    pub a_strides: [usize; MAX_RANK],
    pub b_strides: [usize; MAX_RANK],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binary {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unary {
    Relu,
    LeakyRelu {
        alpha: f32,
    },
    Sigmoid,
    Tanh,
    Clip {
        min: f32,
        max: f32,
    },
    Exp,
    Neg,
    Abs,
    Sqrt,
    Erf,
    /// `max(0, min(1, alpha·x + beta))`.
    HardSigmoid {
        alpha: f32,
        beta: f32,
    },
    /// `x · max(0, min(1, x/6 + 1/2))`.
    HardSwish,
    /// `x · sigmoid(alpha · x)`.
    Swish {
        alpha: f32,
    },
    /// `x/2 · (1 + erf(x/√2))`, or with `tanh` the approximation
    /// `x/2 · (1 + tanh(√(2/π) · (x + 0.044715·x³)))` (ONNX `approximate = "tanh"`),
    /// in f32 as exporters' five-node form computes it: in the left tail the result is
    /// within `3e-7·|x|` of 0 (erf's absolute error), and the exact form gives −∞ at −∞
    /// (the reference: NaN).
    Gelu {
        tanh: bool,
    },
}

/// Inference-time batch normalisation over NCHW-like data: `c` channels, each
/// `inner` elements long, repeated `n` times.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchNorm {
    pub n: usize,
    pub c: usize,
    pub inner: usize,
    pub epsilon: f32,
}

/// `y = x·scale[c] + shift[c]` per channel, then an activation: inference
/// BatchNormalization with its statistics folded at compile time (and any per-channel
/// Mul/Add after it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChannelAffine {
    pub n: usize,
    pub c: usize,
    pub inner: usize,
    pub activation: Activation,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolKind {
    Max,
    Average { count_include_pad: bool },
}

/// 2-D pooling over NCHW. Output sizes already include ONNX `ceil_mode`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pool2d {
    pub kind: PoolKind,
    pub n: usize,
    pub c: usize,
    pub h_in: usize,
    pub w_in: usize,
    pub h_out: usize,
    pub w_out: usize,
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub dilation: [usize; 2],
    /// `[top, left, bottom, right]`
    pub pads: [usize; 4],
}

/// Mean over the innermost `inner` elements of each of `outer` rows
/// (GlobalAveragePool is `outer = N*C`, `inner = H*W`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReduceMean {
    pub outer: usize,
    pub inner: usize,
}

/// Local response normalisation across channels (ONNX LRN).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lrn {
    pub n: usize,
    pub c: usize,
    pub inner: usize,
    pub size: usize,
    pub alpha: f32,
    pub beta: f32,
    pub bias: f32,
}

/// Softmax over an axis of length `len`, with `outer` rows before it and `inner`
/// elements after it (stride of the axis).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Softmax {
    pub outer: usize,
    pub len: usize,
    pub inner: usize,
    pub log: bool,
}

/// Concatenation: the output is `outer` repetitions of each input's chunk in turn; a
/// chunk is `input.len() / outer` elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Concat {
    pub outer: usize,
}

/// A permutation of axes: `out.shape[i] = in_shape[perm[i]]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transpose {
    pub rank: usize,
    pub in_shape: [usize; MAX_RANK],
    pub perm: [usize; MAX_RANK],
}

/// Widest block of output positions a product over several images' unfolded windows
/// takes ([`Conv2d::conv_images_at_once`]): 48 positions, or 96 on AVX-512 CPUs; the
/// scratch is planned at this width on every CPU. (Single images' products block
/// their positions by `kernels::blocked`'s own width.)
pub const CONV_MAX_BLOCK: usize = 96;

impl Conv2d {
    /// True when the convolution is a plain matrix product over the input as it lies
    /// (1×1 kernel, unit stride and dilation, no padding): no im2col needed.
    pub const fn is_pointwise(&self) -> bool {
        self.kernel[0] == 1
            && self.kernel[1] == 1
            && self.stride[0] == 1
            && self.stride[1] == 1
            && self.pads[0] == 0
            && self.pads[1] == 0
            && self.pads[2] == 0
            && self.pads[3] == 0
    }

    /// True for depthwise convolution (one input and one output channel per group),
    /// which has a direct kernel.
    pub const fn is_depthwise(&self) -> bool {
        self.group == self.c_in && self.group == self.c_out && self.group > 1
    }

    /// The depthwise kernel's working rows, as `[ring, row, tiles]` positions of
    /// [`DEPTHWISE_BLOCK`] interleaved channels: a ring of the `(kh − 1)·dh + 1`
    /// padded input rows one output row reads, each `row` positions long (the padded
    /// row, or as far as whole tiles of [`DEPTHWISE_TILE`] outputs read at the
    /// farthest tap, if that is further), and one output row of `tiles` positions
    /// (`w_out` rounded up to whole tiles).
    pub const fn depthwise_rows(&self) -> [usize; 3] {
        let [_, left, _, right] = self.pads;
        let ring = (self.kernel[0] - 1) * self.dilation[0] + 1;
        let tiles = self.w_out.div_ceil(DEPTHWISE_TILE) * DEPTHWISE_TILE;
        let reach =
            tiles.saturating_sub(1) * self.stride[1] + (self.kernel[1] - 1) * self.dilation[1] + 1;
        let padded = self.w_in + left + right;
        let row = if padded > reach { padded } else { reach };
        [ring, row, tiles]
    }

    /// Positions of a depthwise block's input and output planes that it interleaves
    /// whole instead of row by row, `[input, output]`: rows narrower than a block
    /// would go through a scalar copy each, and output rows that are not whole
    /// blocks through a transpose of a block partly done twice. Whole planes go in
    /// runs of a block of positions, rows not minding. The output plane has room for
    /// its last row's whole tiles. 0 where a plane goes row by row, or is too small
    /// to hold one block of positions, or too large to stay in L1 (over 1024).
    pub const fn depthwise_planes(&self) -> [usize; 2] {
        let (plane_in, plane_out) = (self.h_in * self.w_in, self.h_out * self.w_out);
        const fn fits(plane: usize) -> bool {
            plane >= DEPTHWISE_BLOCK && plane <= 1024
        }
        let input = if self.w_in < DEPTHWISE_BLOCK && fits(plane_in) {
            plane_in
        } else {
            0
        };
        let [_, _, tiles] = self.depthwise_rows();
        let output = if !self.w_out.is_multiple_of(DEPTHWISE_BLOCK) && fits(plane_out) {
            plane_out - self.w_out + tiles
        } else {
            0
        };
        [input, output]
    }

    /// The working rows of a direct convolution with a max pool fused in
    /// (`kernels::conv2d_max_pool`), as `[span, slot, reach, tiles]` positions of
    /// [`DEPTHWISE_BLOCK`] interleaved channels: each block keeps a ring of the `span`
    /// convolution rows one pooled row reads, each `slot` positions long (the pool's
    /// padded row, room for the convolution's whole tiles after its left padding, and
    /// as far as the pool's windows reach); `reach` positions of those rows folded
    /// down, and one pooled row of `tiles` positions (whole tiles).
    pub const fn max_pool_rows(&self, pool: &Pool2d) -> [usize; 4] {
        let [_, left, _, right] = pool.pads;
        let span = (pool.kernel[0] - 1) * pool.dilation[0] + 1;
        let reach = pool.w_out.saturating_sub(1) * pool.stride[1]
            + (pool.kernel[1] - 1) * pool.dilation[1]
            + 1;
        let [_, _, conv_tiles] = self.depthwise_rows();
        let mut slot = self.w_out + left + right;
        if left + conv_tiles > slot {
            slot = left + conv_tiles;
        }
        if reach > slot {
            slot = reach;
        }
        let tiles = pool.w_out.div_ceil(DEPTHWISE_TILE) * DEPTHWISE_TILE;
        [span, slot, reach, tiles]
    }

    /// Scratch of `kernels::conv2d_max_pool`, in `f32` elements: the direct kernel's
    /// ([`Self::least_scratch_len`]), and for one thread the rings of every block of
    /// output channels, one row folded down and one pooled row
    /// ([`Self::max_pool_rows`]).
    pub const fn max_pool_scratch_len(&self, pool: &Pool2d) -> usize {
        let [span, slot, reach, tiles] = self.max_pool_rows(pool);
        let blocks = self.c_out.div_ceil(DEPTHWISE_BLOCK);
        self.least_scratch_len() + (blocks * span * slot + reach + tiles) * DEPTHWISE_BLOCK
    }

    /// Scratch the kernel needs, in `f32` elements: the im2col matrix of one block of
    /// output positions of one group (`c_in/group * kh * kw` rows, at most
    /// [`CONV_MAX_BLOCK`] columns), and its product where the block spans images
    /// ([`Self::conv_images_at_once`]); for a depthwise layer, its ring of interleaved
    /// input rows, one output row and the block's weights and biases
    /// ([`Self::depthwise_rows`]), and room for whole planes where it takes them
    /// so ([`Self::depthwise_planes`]; it takes them row by row where a build over
    /// ranges lends less). Where a plane of at most 256 positions has a product of
    /// more than one column block, room to take it as one
    /// ([`Self::one_block_scratch_len`]).
    /// The compiler plans it in the arena as a tensor living for one step.
    pub const fn scratch_len(&self) -> usize {
        let least = self.least_scratch_len();
        if self.is_depthwise() {
            let [input, output] = self.depthwise_planes();
            return least + (input + output) * DEPTHWISE_BLOCK;
        }
        let images = self.images_at_once_scratch_len(CONV_MAX_BLOCK);
        let one_block = self.one_block_scratch_len();
        let most = if images > least { images } else { least };
        if one_block > most { one_block } else { most }
    }

    /// The part of [`Self::scratch_len`] the kernel cannot run without: all of it
    /// but the images-at-once and one-block parts ([`Self::images_at_once_scratch_len`],
    /// [`Self::one_block_scratch_len`]). The kernel checks its scratch against this,
    /// and takes images at once or one block only where the scratch holds that too (a
    /// build over ranges lends the scratch planned at the largest sizes, which need do
    /// neither: this part has to grow with the shape, and those do not).
    pub const fn least_scratch_len(&self) -> usize {
        if self.direct_applies() {
            // Packed weights and biases, then one thread's ring of every input
            // channel's rows and the output rows of the blocks it computes at once.
            let blocks = self.c_out.div_ceil(DEPTHWISE_BLOCK);
            let k_len = self.c_in * self.kernel[0] * self.kernel[1];
            let [ring, row, tiles] = self.depthwise_rows();
            let rows = self.direct_blocks_at_once() * tiles;
            return (blocks * k_len + blocks + rows) * DEPTHWISE_BLOCK + self.c_in * ring * row;
        }
        if self.is_depthwise() {
            let [ring, row, tiles] = self.depthwise_rows();
            let weights = self.kernel[0] * self.kernel[1] + 1;
            return (ring * row + tiles + weights) * DEPTHWISE_BLOCK;
        }
        // One packed run of a block of the product's right operand (the input, or
        // its unfolded windows).
        let taps = self.kernel[0] * self.kernel[1];
        let k_len = (self.c_in / self.group) * taps;
        crate::kernels::blocked_scratch_len(k_len, taps, self.h_out * self.w_out)
    }

    /// Scratch for one image's product over all its output positions at once, where
    /// they are at most 256 (W read once a run; `kernels::blocked`), else
    /// [`Self::least_scratch_len`]; 0 for the direct and depthwise kernels.
    pub const fn one_block_scratch_len(&self) -> usize {
        if self.direct_applies() || self.is_depthwise() {
            return 0;
        }
        let taps = self.kernel[0] * self.kernel[1];
        let k_len = (self.c_in / self.group) * taps;
        crate::kernels::blocked_one_block_scratch_len(k_len, taps, self.h_out * self.w_out)
    }

    /// Scratch for [`Self::conv_images_at_once`] at `block` positions a block: the
    /// unfolded columns of its images and the product before it is scattered to them
    /// (0 where it does not apply).
    pub const fn images_at_once_scratch_len(&self, block: usize) -> usize {
        let Some(images) = self.conv_images_at_once(block) else {
            return 0;
        };
        let cols = images * self.h_out * self.w_out;
        (self.c_in * self.kernel[0] * self.kernel[1] + self.c_out) * cols
    }

    /// How many images one im2col product covers on a CPU whose blocks are `block`
    /// positions wide (at most [`CONV_MAX_BLOCK`]), where it is more than one: a
    /// batch of images with no more than half a block of output positions each, one
    /// group. `None` where each image (or block of one) is its own product.
    pub const fn conv_images_at_once(&self, block: usize) -> Option<usize> {
        let positions = self.h_out * self.w_out;
        if self.direct_applies()
            || self.group != 1
            || self.n < 2
            || positions == 0
            || self.is_pointwise()
            || self.is_depthwise()
        {
            return None;
        }
        let images = block / positions;
        if images < 2 {
            return None;
        }
        Some(if images < self.n { images } else { self.n })
    }

    /// Blocks of [`DEPTHWISE_BLOCK`] output channels the direct kernel computes at most
    /// at once, each into an output row of its own in the scratch: four, which share
    /// each input they broadcast (two where the CPU has 16 vector registers, and one at
    /// stride 1 below sixteen lanes: `kernels::direct` says why), or as many as the
    /// layer has.
    pub const fn direct_blocks_at_once(&self) -> usize {
        let blocks = self.c_out.div_ceil(DEPTHWISE_BLOCK);
        if blocks < 4 { blocks } else { 4 }
    }

    /// Whether the layer runs as a direct convolution (`kernels::conv2d`'s direct
    /// kernel) rather than Winograd or im2col + GEMM: one group, no dilation, and
    /// either a 3×3 window at stride 1 or 2 with at most [`DIRECT_MAX_CHANNELS_IN`]
    /// input channels or at most [`DIRECT_MAX_CHANNELS_OUT`] output channels, or an
    /// image stem's 7×7 window at stride 2 over at most
    /// [`DIRECT_STEM_MAX_CHANNELS_IN`]; and at most [`DIRECT_MAX_WEIGHTS`] weights
    /// (packed into the scratch each call). Winograd takes such a layer of at least
    /// [`WINOGRAD_BY_SHAPE_MIN_CHANNELS_IN`] input channels where the shape may decide
    /// ([`Self::winograd_variant`]).
    pub const fn direct_applies(&self) -> bool {
        let [kh, kw] = self.kernel;
        let [sh, sw] = self.stride;
        let three = kh == 3
            && kw == 3
            && sh == sw
            && (sh == 1 || sh == 2)
            && (self.c_in <= DIRECT_MAX_CHANNELS_IN || self.c_out <= DIRECT_MAX_CHANNELS_OUT);
        let stem =
            kh == 7 && kw == 7 && sh == 2 && sw == 2 && self.c_in <= DIRECT_STEM_MAX_CHANNELS_IN;
        (three || stem)
            && self.dilation[0] == 1
            && self.dilation[1] == 1
            && self.group == 1
            && self.c_out * self.c_in * kh * kw <= DIRECT_MAX_WEIGHTS
    }

    /// Whether a build over declared ranges runs the layer as Winograd F(2×2)
    /// ([`Self::winograd_variant`]): a 3×3 window at stride 1, no dilation, one group,
    /// at least [`WINOGRAD_MIN_CHANNELS_IN`] input channels and
    /// [`WINOGRAD_MIN_CHANNELS_OUT`] output channels, and not a direct convolution
    /// ([`Self::direct_applies`]: too few output channels). Only the channels decide,
    /// so such a build chooses the same at every size.
    pub const fn winograd_applies(&self) -> bool {
        self.winograd_geometry()
            && self.c_in >= WINOGRAD_MIN_CHANNELS_IN
            && self.c_out >= WINOGRAD_MIN_CHANNELS_OUT
            && !self.direct_applies()
    }

    /// The window the Winograd kernel computes: 3×3 at stride 1, no dilation, one
    /// group (which layers take it is a matter of speed: [`Self::winograd_variant`]).
    pub const fn winograd_geometry(&self) -> bool {
        self.kernel[0] == 3
            && self.kernel[1] == 3
            && self.stride[0] == 1
            && self.stride[1] == 1
            && self.dilation[0] == 1
            && self.dilation[1] == 1
            && self.group == 1
    }

    /// The Winograd variant the layer runs as, if any. Where the shape may decide
    /// (`by_shape`: a build at fixed sizes), [`Self::winograd`] for the layers of its
    /// window with at least [`WINOGRAD_BY_SHAPE_MIN_CHANNELS_IN`] input and
    /// [`WINOGRAD_BY_SHAPE_MIN_CHANNELS_OUT`] output channels, whichever kernel would take them
    /// otherwise. In a build over declared ranges, whose one set of weights serves
    /// every size, F(2×2) for the layers [`Self::winograd_applies`] takes.
    pub const fn winograd_variant(&self, by_shape: bool) -> Option<Winograd> {
        if !by_shape {
            return if self.winograd_applies() {
                Some(Winograd::F2)
            } else {
                None
            };
        }
        if self.winograd_geometry()
            && self.c_in >= WINOGRAD_BY_SHAPE_MIN_CHANNELS_IN
            && self.c_out >= WINOGRAD_BY_SHAPE_MIN_CHANNELS_OUT
        {
            Some(self.winograd())
        } else {
            None
        }
    }

    /// The Winograd variant a layer of this shape runs as, where it runs as Winograd
    /// at all: F(4×4, 3×3) where its output has at least [`WINOGRAD_F4_MIN_TILES`]
    /// of its tiles, else F(2×2, 3×3). A build over declared ranges takes F(2×2) at
    /// every size (the compiler's choice: the weights differ).
    pub const fn winograd(&self) -> Winograd {
        let [rows, cols] = self.winograd_tiles(Winograd::F4);
        if rows * cols >= WINOGRAD_F4_MIN_TILES {
            Winograd::F4
        } else {
            Winograd::F2
        }
    }

    /// `[rows, columns]` of `v`'s output tiles (the last ones partial where the size
    /// is not a multiple of the tile's side).
    pub const fn winograd_tiles(&self, v: Winograd) -> [usize; 2] {
        [self.h_out.div_ceil(v.tile()), self.w_out.div_ceil(v.tile())]
    }

    /// Tiles per Winograd block, at most ([`Self::winograd_block_most`]); where blocks
    /// take whole tile rows, as few rows as cut the image into as many blocks of about
    /// equal rows: the weights are read once a block whatever its size, and a last
    /// block of one short row (20 and 5 tiles for 5 rows of 5) read them all again for
    /// a quarter of the tiles.
    pub const fn winograd_block(&self, v: Winograd) -> usize {
        let [rows, cols] = self.winograd_tiles(v);
        let most = self.winograd_block_most(v);
        let rows_at_most = most / cols;
        if rows * cols <= most || rows_at_most == 0 {
            return most;
        }
        let blocks = rows.div_ceil(rows_at_most);
        rows.div_ceil(blocks) * cols
    }

    /// The most tiles a Winograd block takes, which sizes its scratch: its transformed
    /// input (`v.products()` floats per tile and input channel) and its products (as
    /// many per tile and output channel) share one region of `products·max(c_in,
    /// c_out) + min(c_in, c_out)` floats a tile, which stays within
    /// [`WINOGRAD_BLOCK_FLOATS`], or within as many floats as the transformed weights
    /// up to [`WINOGRAD_BLOCK_FLOATS_MAX`]; between 16 and [`WINOGRAD_MAX_BLOCK`]
    /// tiles, a whole number of lane groups, and no more than the image has. It never
    /// shrinks as the image grows (unlike [`Self::winograd_block`]), so the scratch of
    /// a build over ranges, planned at the largest sizes, serves every smaller one.
    pub const fn winograd_block_most(&self, v: Winograd) -> usize {
        let [rows, cols] = self.winograd_tiles(v);
        let weights = v.products() * self.c_in * self.c_out;
        let budget = if weights < WINOGRAD_BLOCK_FLOATS {
            WINOGRAD_BLOCK_FLOATS
        } else if weights > WINOGRAD_BLOCK_FLOATS_MAX {
            WINOGRAD_BLOCK_FLOATS_MAX
        } else {
            weights
        };
        let mut block = budget / self.winograd_floats_per_tile(v);
        if block > WINOGRAD_MAX_BLOCK {
            block = WINOGRAD_MAX_BLOCK;
        }
        block -= block % WINOGRAD_LANES;
        // Narrower blocks multiply too few columns a product (8: half the speed).
        if block < 16 {
            block = 16;
        }
        let tiles = rows * cols;
        if tiles < block { tiles } else { block }
    }

    /// Floats of a Winograd block's region per tile (see [`Conv2d::winograd_block`]).
    pub const fn winograd_floats_per_tile(&self, v: Winograd) -> usize {
        let (wide, narrow) = if self.c_in > self.c_out {
            (self.c_in, self.c_out)
        } else {
            (self.c_out, self.c_in)
        };
        v.products() * wide + narrow
    }

    /// Scratch of `kernels::conv2d_winograd` as `v`, in `f32` elements, as planned:
    /// [`Self::winograd_least_scratch_len`], and for a layer of one block room to lay
    /// its transformed input and products apart ([`Self::winograd_banded_len`]), so
    /// that threads can share the products by bands of output channels; or the direct
    /// kernel's ([`Self::scratch_len`]), where that is more and it may take the layer
    /// instead ([`Self::direct_rivals_winograd`]).
    pub const fn winograd_scratch_len(&self, v: Winograd) -> usize {
        let (region, banded) = (self.winograd_region_len(v), self.winograd_banded_len(v));
        let winograd =
            (if banded > region { banded } else { region }) + self.winograd_window_len(v);
        let direct = if self.direct_rivals_winograd() {
            self.scratch_len()
        } else {
            0
        };
        if direct > winograd { direct } else { winograd }
    }

    /// The scratch `kernels::conv2d_winograd` cannot run without: a block's region of
    /// transformed input and products (rows of whole lane groups), and the window of
    /// one input channel its tiles' patches read ([`Self::winograd_window_len`]); or
    /// the direct kernel's, where that is more and it may take the layer instead
    /// ([`Self::direct_rivals_winograd`]).
    pub const fn winograd_least_scratch_len(&self, v: Winograd) -> usize {
        let winograd = self.winograd_region_len(v) + self.winograd_window_len(v);
        let direct = if self.direct_rivals_winograd() {
            self.least_scratch_len()
        } else {
            0
        };
        if direct > winograd { direct } else { winograd }
    }

    /// Whether a layer that runs as Winograd also carries its raw weights, for the
    /// direct kernel to take it where the CPU has sixteen lanes at full rate
    /// (`kernels::conv2d_winograd_or_direct`): a direct convolution's window
    /// ([`Self::direct_applies`]) over at most [`DIRECT_RIVAL_MAX_CHANNELS_IN`] input
    /// channels.
    pub const fn direct_rivals_winograd(&self) -> bool {
        self.winograd_geometry()
            && self.c_in <= DIRECT_RIVAL_MAX_CHANNELS_IN
            && self.direct_applies()
    }

    /// Floats of a one-block layer's transformed input and products laid apart (each
    /// matrix followed by [`WINOGRAD_SKEW`] floats, the products' in each of up to
    /// [`WINOGRAD_MAX_BANDS`] bands); 0 for a layer of several blocks.
    pub const fn winograd_banded_len(&self, v: Winograd) -> usize {
        let [rows, cols] = self.winograd_tiles(v);
        let block = self.winograd_block_most(v);
        if rows * cols > block {
            return 0;
        }
        let ld = block.next_multiple_of(WINOGRAD_LANES);
        v.products() * ((self.c_in + self.c_out) * ld + (1 + WINOGRAD_MAX_BANDS) * WINOGRAD_SKEW)
    }

    /// Floats of a Winograd block's transformed input and products: a block's tiles in
    /// whole lane groups, and each matrix of one kind followed by [`WINOGRAD_SKEW`]
    /// floats (the products overlap the transformed input they no longer need).
    pub const fn winograd_region_len(&self, v: Winograd) -> usize {
        let lanes = self.winograd_block_most(v).next_multiple_of(WINOGRAD_LANES);
        self.winograd_floats_per_tile(v) * lanes + v.products() * WINOGRAD_SKEW
    }

    /// Floats of the input window a Winograd block's patches lie in, at most: `g` whole
    /// tile rows of `w` tiles (`g·w` within the block, `b`) take `T·(g − 1) + P` input
    /// rows of `T·(w − 1) + 8` floats (8 from the last lane's first column), which is
    /// at most `T·b·(8 + P − T) + (P − T)·(8 − T)`; a bound that grows with the block,
    /// so the scratch lent at a build's largest sizes serves every smaller one.
    pub const fn winograd_window_len(&self, v: Winograd) -> usize {
        let (t, p) = (v.tile(), v.patch());
        t * self.winograd_block_most(v) * (WINOGRAD_LANES + p - t) + (p - t) * (WINOGRAD_LANES - t)
    }
}
