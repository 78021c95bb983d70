//! `include_model!` used as a user would: a small residual CNN with seeded random
//! weights (`models/tiny_cnn.onnx`, made by `scripts/make_macro_fixtures.py`), compiled
//! twice from one file: for a batch of two, and for one item with a smaller arena
//! alignment. `tests/tiny_cnn.rs` runs both against onnxruntime's outputs.
//!
//! The model is committed (10 KB) rather than taken from `testdata/`: the macro reads it
//! while this crate compiles, so a missing file would break `cargo build --workspace`,
//! not just one test.

#![warn(missing_docs)]

kiln_macros::include_model!("models/tiny_cnn.onnx", input("x" = [2, 3, 16, 16]),);

kiln_macros::include_model!(
    "models/tiny_cnn.onnx",
    name = tiny_cnn_single,
    input("x" = [1, 3, 16, 16]),
    alignment = 64,
);
