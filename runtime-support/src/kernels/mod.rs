//! CPU kernels, one per operator family, generic over what varies.
//!
//! Contract: the compiler passes slices of exactly the lengths the parameters imply;
//! kernels assert this at entry (a mismatch is a Kiln bug, not bad input) and never
//! allocate.

use crate::params::*;

pub fn conv2d(
    p: &Conv2d,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    scratch: &mut [f32],
) {
    let _ = (p, x, w, bias, y, scratch);
    unimplemented!()
}
pub fn gemm(p: &Gemm, a: &[f32], b: &[f32], c: Option<&[f32]>, y: &mut [f32]) {
    let _ = (p, a, b, c, y);
    unimplemented!()
}
pub fn matmul(p: &MatMul, a: &[f32], b: &[f32], y: &mut [f32]) {
    let _ = (p, a, b, y);
    unimplemented!()
}
#[allow(clippy::too_many_arguments)]
pub fn batch_norm(
    p: &BatchNorm,
    x: &[f32],
    scale: &[f32],
    bias: &[f32],
    mean: &[f32],
    var: &[f32],
    y: &mut [f32],
) {
    let _ = (p, x, scale, bias, mean, var, y);
    unimplemented!()
}
pub fn unary(op: Unary, x: &[f32], y: &mut [f32]) {
    let _ = (op, x, y);
    unimplemented!()
}
pub fn unary_inplace(op: Unary, y: &mut [f32]) {
    let _ = (op, y);
    unimplemented!()
}
pub fn binary(op: Binary, p: &Broadcast, a: &[f32], b: &[f32], y: &mut [f32]) {
    let _ = (op, p, a, b, y);
    unimplemented!()
}
/// `y = op(y, b)`; `p.a_strides` describe `y` itself (contiguous).
pub fn binary_inplace(op: Binary, p: &Broadcast, y: &mut [f32], b: &[f32]) {
    let _ = (op, p, y, b);
    unimplemented!()
}
pub fn pool2d(p: &Pool2d, x: &[f32], y: &mut [f32]) {
    let _ = (p, x, y);
    unimplemented!()
}
pub fn reduce_mean(p: &ReduceMean, x: &[f32], y: &mut [f32]) {
    let _ = (p, x, y);
    unimplemented!()
}
pub fn lrn(p: &Lrn, x: &[f32], y: &mut [f32]) {
    let _ = (p, x, y);
    unimplemented!()
}
pub fn softmax(p: &Softmax, x: &[f32], y: &mut [f32]) {
    let _ = (p, x, y);
    unimplemented!()
}
pub fn concat(p: &Concat, inputs: &[&[f32]], y: &mut [f32]) {
    let _ = (p, inputs, y);
    unimplemented!()
}
pub fn transpose(p: &Transpose, x: &[f32], y: &mut [f32]) {
    let _ = (p, x, y);
    unimplemented!()
}
pub fn copy(x: &[f32], y: &mut [f32]) {
    y.copy_from_slice(x);
}
