//! The CUDA target checked without a GPU. `build.rs` compiles the nine zoo models and
//! two small in-memory models for the CUDA target, so building this crate proves the
//! generated modules are valid Rust against `kiln_runtime::cuda`; the tests check the
//! launches they make (`tests/launches.rs`) and run whole models through the CPU
//! emulator of the CUDA kernels (`tests/emulator.rs`).

use kiln_runtime::cuda::{Launch, Launcher, Ptrs};

#[path = "../../src/testdata.rs"]
mod testdata;

pub use testdata::{compare, load_npy, logits_index, require_testdata};

/// One generated CUDA module, reached through its constants and `launch_all`.
pub struct CudaModel {
    pub name: &'static str,
    /// Its `testdata/` folder (empty for the in-memory models).
    pub dir: &'static str,
    pub arena_bytes: usize,
    pub weights_bytes: usize,
    /// Path of its weights file, for the models the tests run.
    pub weights: Option<&'static str>,
    /// Path of the weights file of its CPU twin (the in-memory models): a CPU build's
    /// blob differs where it packs weights at compile time (constant MatMul operands).
    pub cpu_weights: Option<&'static str>,
    pub steps: &'static [(&'static str, &'static str)],
    pub kernels: &'static [&'static str],
    pub inputs: &'static [kiln_runtime::TensorInfo],
    pub outputs: &'static [kiln_runtime::TensorInfo],
    pub output_regions: &'static [(usize, usize)],
    pub launch_all: kiln_runtime::cuda::LaunchFn,
}

/// The generated modules (no lint allowances: generated code must be clippy-clean).
pub mod generated {
    use super::CudaModel;
    include!(concat!(env!("OUT_DIR"), "/cuda_check.rs"));
}

pub use generated::{SMALL, ZOO};

/// The compiled zoo model `name`.
pub fn zoo(name: &str) -> &'static CudaModel {
    require_testdata();
    ZOO.iter()
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("model {name} was not compiled; is testdata/ complete?"))
}

/// The compiled in-memory model `name` (CUDA target).
pub fn small(name: &str) -> &'static CudaModel {
    SMALL
        .iter()
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("model {name} was not compiled"))
}

/// A launcher that runs nothing and records every launch.
#[derive(Default)]
pub struct Recorder {
    pub launches: Vec<(&'static str, Launch, Ptrs)>,
}

impl Launcher for Recorder {
    fn launch(
        &mut self,
        step: &'static str,
        launch: &Launch,
        ptrs: &Ptrs,
    ) -> Result<(), kiln_runtime::Error> {
        self.launches.push((step, *launch, *ptrs));
        Ok(())
    }
}

/// Deterministic inputs in [-1, 1) for the small models (xorshift32).
pub fn input(len: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// Checks a zoo model's outputs `outs` (run on `what`) against onnxruntime's in `dir`,
/// with the tolerances of `tests/tests/zoo.rs`: logits within 1e-3 · max(1, max|ref|),
/// probabilities within 1e-4.
pub fn check_zoo_outputs(name: &str, dir: &std::path::Path, outs: &[Vec<f32>], what: &str) {
    let logits = logits_index(dir);
    for (i, got) in outs.iter().enumerate() {
        let file = format!("random_expected_{i}.npy");
        let want = load_npy(&dir.join(&file));
        let atol = if i == logits {
            1e-3 * want.data.iter().fold(1.0f32, |m, v| m.max(v.abs()))
        } else {
            1e-4
        };
        let (max, ok) = compare(got, &want.data, atol, 0.0);
        eprintln!("{name:<12} {what} output {i}: max |diff| {max:.3e} (atol {atol:.1e})");
        assert!(
            ok,
            "{name} ({what}): output {i} differs from {file}: max |diff| {max:e}"
        );
    }
}
