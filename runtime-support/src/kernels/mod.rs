//! CPU kernels, one per operator family, generic over what varies.
//!
//! Contract: the compiler passes slices of exactly the lengths the parameters imply;
//! kernels assert this at entry (a mismatch is a Kiln bug, not bad input) and never
//! allocate. Matrix products go through faer (see `gemm.rs`), which keeps one
//! thread-local packing buffer per thread after its first large product and allocates
//! nothing afterwards.
//!
//! Layout of this module:
//! - `conv`: Conv2d (pointwise, im2col + GEMM); `blocked`: its product over blocks
//!   of the input or its unfolded windows, packed on the fly; `depthwise` and `direct`: its
//!   direct kernels in explicit SIMD (depthwise; 3×3 with few input channels), which
//!   share `depthwise`'s 8×8 transposes; `stem`: image stems (at most 4 input
//!   channels) with output positions as the lanes, no transposes;
//! - `winograd`: Conv2d 3×3 at stride 1 as Winograd F(2×2, 3×3) or F(4×4, 3×3), weights transformed
//!   at compile time (or, for a few input channels on a CPU with sixteen lanes, the
//!   direct kernel over the raw weights the layer carries too);
//! - `gemm`: Gemm, MatMul and the single faer call every faer product goes through;
//!   `packed`: MatMul by a constant matrix the compiler packed (our own micro-kernel);
//! - `elementwise`: unary and broadcasting binary ops, the fused bias/activation stage;
//! - `pool`: MaxPool/AveragePool and ReduceMean (`strided_max`: 3×3 s2 max pools
//!   with AVX-512); `norm`: BatchNorm, LRN, Softmax;
//! - `affine`: per-channel scale and shift with a fused activation (folded BatchNorm);
//! - `layout`: Concat, Transpose, copy;
//! - helpers: `index` (shape simplification and odometers), `window` (sliding-window
//!   geometry), `simd` (running loops with AVX2/FMA, vectorisable `exp`).

mod affine;
mod blocked;
mod conv;
mod conv_transpose;
mod depthwise;
mod direct;
mod elementwise;
pub(crate) mod gemm;
pub(crate) mod index;
mod layout;
mod norm;
mod packed;
mod pool;
pub(crate) mod simd;
mod stem;
#[cfg(target_arch = "x86_64")]
mod strided_max;
mod window;
mod winograd;

pub use affine::{channel_affine, channel_affine_inplace};
pub(crate) use blocked::{
    one_block_scratch_len as blocked_one_block_scratch_len, scratch_len as blocked_scratch_len,
};
pub use conv::{
    conv2d, conv2d_max_pool, conv2d_residual, conv2d_residual_inplace, conv2d_shuffled,
};
pub use conv_transpose::conv_transpose_rows;
pub use elementwise::{binary, binary_inplace, binary_inplace_b, unary, unary_inplace};
pub use gemm::{gemm, matmul};
pub use layout::{concat, copy, transpose};
pub use norm::{
    LRN_INPLACE_MAX_SIZE, batch_norm, batch_norm_inplace, lrn, lrn_inplace, softmax,
    softmax_inplace,
};
pub use packed::{PANEL, matmul_packed, pack_b, packed_b_len};
pub use pool::{pool2d, pool2d_overlapping, reduce_mean};
pub use winograd::{conv2d_winograd, conv2d_winograd_or_direct, winograd_weights};
