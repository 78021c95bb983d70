//! Kernels generic over the element type: every ONNX dtype Kiln supports (`Elem`),
//! for the operators whose meaning does not depend on a tuned float32 layout.
//!
//! Calling convention (the compiler relies on it): `kernel::<T..>(&params, inputs..,
//! outputs..)`, parameters from [`params`] (plain data deriving `Serialize`, which the
//! compiler writes as a Rust constant expression), inputs as `&[T]`, outputs as
//! `&mut [T]`. The same functions run at compile time for constant folding.

pub mod attention;
pub mod conv;
pub mod elem;
pub mod elementwise;
pub mod extent;
pub mod index;
pub mod layout;
pub mod matmul;
pub mod misc;
pub mod norm;
pub mod params;
pub mod recurrent;
pub mod reduce;
pub mod resize;
pub mod resize_tables;
pub mod rotary;
pub mod signal;
pub mod small;
pub mod view;

/// The float32 2-D ConvTranspose over matrix products (`kernels`), called like the
/// typed kernels.
pub use crate::kernels::conv_transpose_rows;
pub use attention::attention;
pub use conv::{
    conv_integer, conv_nd, conv_transpose, deform_conv, dequantize_linear, dynamic_quantize_linear,
    matmul_integer, max_pool_indices, max_unpool, pool, qlinear_conv, qlinear_matmul,
    quantize_linear,
};
pub use elem::{Bool, Elem};
pub use elementwise::{
    binary, binary_acc, cast, compare, is_inf, is_nan, pow, range, unary, unary_inplace, where_,
};
pub use extent::{
    compress, nms_scratch_len, non_max_suppression, non_zero, top_k_dynamic, unique,
    unique_scratch_len,
};
pub use index::{
    Index, eye_like, gather, gather_elements, gather_nd, one_hot, scatter_elements, scatter_nd,
    top_k,
};
pub use layout::{concat, copy_strided, pad, trilu};
pub use matmul::matmul;
pub use misc::{
    bitcast, cumprod, det, einsum, loss, loss_log_prob, reverse_sequence, swiglu, tensor_scatter,
};
pub use norm::{batch_norm, group_norm, layer_norm, lp_norm, lrn, mean_variance_norm, rms_norm};
pub use recurrent::{gru, lstm, rnn};
pub use reduce::{arg_reduce, cumsum, hardmax, reduce, softmax};
pub use resize::{affine_grid, col2im, grid_sample, resize};
pub use resize_tables::{resize_sampled, resize_tables};
pub use rotary::{rotary_embedding, rotary_embedding_pos};
pub use signal::{dft, mel_weight_matrix, stft, window};
pub use small::{
    Float4E2M1, Float8E4M3FN, Float8E4M3FNUZ, Float8E5M2, Float8E5M2FNUZ, Float8E8M0, Int2, Int4,
    UInt2, UInt4, cast_with,
};
pub use view::{copy, input, view, view_mut};
