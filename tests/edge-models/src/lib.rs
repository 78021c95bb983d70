//! Models at the edges of Kiln's generated API, made by `scripts/make_edge_models.py`
//! (`testdata/edge/<case>/`) and compiled by `build.rs` into this one crate: no graph
//! inputs, outputs that are weights, constants or inputs, a value listed twice as an
//! output, rank-0 and zero-sized tensors, names that are Rust keywords or no
//! identifiers, a single node, 2,000 outputs, outputs whose extent the data decides
//! (NonZero, Compress, Unique, NonMaxSuppression, TopK with a run-time k), and the small CNN the concurrency tests
//! share between threads (also compiled for the CUDA target, run by the emulator).

/// Runs a case once on graph-ordered input bytes; returns graph-ordered output bytes,
/// each with Kiln's shape of it (an extent the data decides as the run found it).
pub type RunFn = fn(&[&[u8]]) -> Result<Vec<Output>, kiln_runtime::Error>;

/// One output's bytes and shape.
pub type Output = (Vec<u8>, Vec<usize>);

/// What became of a case at build time.
pub enum Status {
    /// Compiled into [`generated::cases`]; this runs it.
    Compiled(RunFn),
    /// The compiler's error.
    Rejected(&'static str),
}

/// One case of `testdata/edge`.
pub struct Case {
    pub name: &'static str,
    /// Its folder (model.onnx, input_k.npy, expected_k.npy, meta.json).
    pub dir: &'static str,
    pub status: Status,
}

/// The generated modules (no lint allowances: generated code must be clippy-clean).
pub mod generated {
    use super::{Case, Output, Status};
    include!(concat!(env!("OUT_DIR"), "/edge.rs"));
}

pub use generated::{CASES, cases};

/// Fails with instructions when the test data was never generated.
pub fn require_testdata() {
    let missing = env!("KILN_TESTDATA_MISSING");
    assert!(
        missing.is_empty(),
        "no edge models in {missing}: run `bash .ci/run` (or scripts/setup-python.sh and \
         .venv/bin/python scripts/make_edge_models.py) first"
    );
}
