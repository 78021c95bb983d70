//! A model compiled by `build.rs` with `kiln_compiler::Builder`, included as the README
//! shows. `tests/squeezenet.rs` runs it against onnxruntime's outputs.

/// SqueezeNet 1.0 (the ONNX model zoo's "light" model) with seeded random weights.
#[cfg(not(kiln_no_testdata))]
pub mod squeezenet {
    include!(concat!(env!("OUT_DIR"), "/squeezenet.rs"));
}
