//! Each kernel against a naive reference written straight from the ONNX definition, on
//! awkward shapes (size 1, odd sizes, 255/257, groups, dilation, asymmetric padding,
//! stride 2, every broadcast pattern). Tolerances are stated per test, relative to
//! `max(1, |reference|)`.

mod affine;
mod bench;
mod conv;
mod elementwise;
mod gemm;
mod layout;
mod norm;
mod pool;
mod reference;
mod threads;
mod winograd;
