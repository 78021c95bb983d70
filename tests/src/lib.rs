//! Shared helpers for Kiln's end-to-end tests: the zoo models compiled by `build.rs`,
//! `.npy` loading, and output comparison with stated tolerances.

use std::path::Path;

/// Loads a model's weights from a path, runs it once on byte inputs, returns its outputs.
pub type RunFn = fn(&str, &[&[u8]]) -> Result<Vec<Vec<f32>>, kiln_runtime::Error>;

/// One compiled zoo model, driven through the generic byte interface.
pub struct ZooModel {
    pub name: &'static str,
    /// Its `testdata/` folder.
    pub dir: &'static str,
    /// The variant with seeded random weights (compared with onnxruntime).
    pub random: bool,
    pub arena_bytes: usize,
    /// The liveness lower bound without in-place aliasing.
    pub lower_bound_bytes: usize,
    /// The bound with the plan's in-place aliases (at most `lower_bound_bytes`).
    pub in_place_lower_bound_bytes: usize,
    pub naive_bytes: usize,
    /// The step order Kiln kept: `file order` or `memory-aware`.
    pub schedule: &'static str,
    pub inputs: &'static [kiln_runtime::TensorInfo],
    pub outputs: &'static [kiln_runtime::TensorInfo],
    /// Path of its weights file.
    pub weights: &'static str,
    /// Loads the weights, runs once, returns every output.
    pub run: RunFn,
}

#[allow(clippy::all)]
pub mod zoo {
    use super::ZooModel;
    include!(concat!(env!("OUT_DIR"), "/zoo.rs"));
}

/// Fails with instructions when the test data was never generated.
pub fn require_testdata() {
    let missing = env!("KILN_TESTDATA_MISSING");
    assert!(
        missing.is_empty(),
        "no test data in {missing}: run `bash .ci/run` (or scripts/setup-python.sh and \
         .venv/bin/python scripts/make_testdata.py) first"
    );
}

pub fn find(name: &str) -> &'static ZooModel {
    require_testdata();
    zoo::MODELS
        .iter()
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("model {name} was not compiled; is testdata/ complete?"))
}

pub fn load_npy(path: &Path) -> kiln_compiler::npy::Array {
    kiln_compiler::npy::read(path).unwrap_or_else(|e| panic!("{e}"))
}

/// Bytes of an `f32` slice, as the byte interface takes them.
pub fn bytes(v: &[f32]) -> &[u8] {
    kiln_runtime::io::as_bytes(v)
}

/// Largest absolute difference and whether every element satisfies
/// `|got - want| <= atol + rtol * |want|`.
pub fn compare(got: &[f32], want: &[f32], atol: f32, rtol: f32) -> (f32, bool) {
    assert_eq!(got.len(), want.len(), "output length");
    let mut max = 0.0f32;
    let mut ok = true;
    for (&g, &w) in got.iter().zip(want) {
        let d = (g - w).abs();
        max = max.max(d);
        // NaN fails too: it is not within any tolerance.
        if d.is_nan() || d > atol + rtol * w.abs() {
            ok = false;
        }
    }
    (max, ok)
}
