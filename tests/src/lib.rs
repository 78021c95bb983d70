//! Shared helpers for Kiln's end-to-end tests: the zoo models compiled by `build.rs`,
//! `.npy` loading, and output comparison with stated tolerances.

mod testdata;

pub use testdata::{compare, load_npy, logits_index, require_testdata};

/// Loads a model's weights from a path, runs it once on byte inputs with a context of
/// that many threads, returns its outputs.
pub type RunFn = fn(&str, &[&[u8]], usize) -> Result<Vec<Vec<f32>>, kiln_runtime::Error>;

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
    /// Loads the weights, runs once with a context of N threads, returns every output.
    pub run: RunFn,
}

#[allow(clippy::all)]
pub mod zoo {
    use super::ZooModel;
    include!(concat!(env!("OUT_DIR"), "/zoo.rs"));
}

pub fn find(name: &str) -> &'static ZooModel {
    require_testdata();
    zoo::MODELS
        .iter()
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("model {name} was not compiled; is testdata/ complete?"))
}

/// Bytes of an `f32` slice, as the byte interface takes them.
pub fn bytes(v: &[f32]) -> &[u8] {
    kiln_runtime::io::as_bytes(v)
}
