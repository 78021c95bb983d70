//! The generated CUDA modules on a real NVIDIA GPU (feature `device`). CI has no GPU: it
//! builds this file (`--all-features`) but the tests are ignored; on a machine with one:
//!
//! ```text
//! KILN_CUDA_CHECK_ALL_WEIGHTS=1 cargo test --release -p kiln-cuda-check --features device \
//!     --test device -- --ignored
//! ```
//!
//! Each zoo model (`random.onnx`) runs through `DeviceModel`/`DeviceContext` — NVRTC
//! compiling the kernels for the device, the launches of `launch_all`, the pointer checks
//! — and is compared with onnxruntime's outputs at the tolerances of `tests/emulator.rs`
//! (logits within 1e-3 · max(1, max|ref|), probabilities within 1e-4). The same run is
//! repeated as a captured CUDA graph and with Gemm steps on cuBLAS; the small in-memory
//! models are compared with the CPU target. Each test prints its latency.
//!
//! `KILN_DEVICE_DATA=DIR` reads the data from a copy instead of the paths compiled in
//! (for a GPU machine that got the build by copy): `DIR/<model>/` holds the model's
//! `meta.json` and `random_*.npy`, and `DIR/` its `<model>.weights.bin` (and a small
//! model's CPU twin's `<model>_cpu.weights.bin`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use kiln_cuda_check::{CudaModel, check_zoo_outputs, compare, input, load_npy, small, zoo};
use kiln_runtime::Weights;
use kiln_runtime::cuda::{DeviceContext, DeviceModel};

fn relocated() -> Option<PathBuf> {
    std::env::var_os("KILN_DEVICE_DATA").map(PathBuf::from)
}

fn data_dir(m: &CudaModel) -> PathBuf {
    match relocated() {
        Some(dir) => dir.join(m.name),
        None => PathBuf::from(m.dir),
    }
}

/// The weights file of `m`.
fn weights_path(m: &CudaModel) -> PathBuf {
    let compiled = m.weights.unwrap_or_else(|| {
        panic!(
            "{}: no weights file; build with KILN_CUDA_CHECK_ALL_WEIGHTS=1",
            m.name
        )
    });
    relocate(compiled)
}

/// The weights file of the CPU twin of the small model `m`.
fn cpu_weights_path(m: &CudaModel) -> PathBuf {
    relocate(m.cpu_weights.expect("a small model has a CPU twin"))
}

/// A compiled-in weights path, or the same file in `KILN_DEVICE_DATA`.
fn relocate(compiled: &str) -> PathBuf {
    match relocated() {
        Some(dir) => dir.join(Path::new(compiled).file_name().expect("a file name")),
        None => PathBuf::from(compiled),
    }
}

fn weights(m: &CudaModel) -> Weights {
    let path = weights_path(m);
    Weights::from_file(&path, m.weights_bytes)
        .unwrap_or_else(|e| panic!("{}: {}: {e}", m.name, path.display()))
}

/// How one run is made on the device.
#[derive(Clone, Copy, Debug)]
struct Mode {
    graph: bool,
    cublas: bool,
}

const MODES: [Mode; 3] = [
    Mode {
        graph: false,
        cublas: false,
    },
    Mode {
        graph: true,
        cublas: false,
    },
    Mode {
        graph: true,
        cublas: true,
    },
];

/// Runs `m` on device 0 in each of [`MODES`]: the outputs of each mode, after printing
/// the median latency (host copies included) of `runs` runs.
fn on_device(m: &CudaModel, inputs: &[&[f32]], runs: usize) -> Vec<(Mode, Vec<Vec<f32>>)> {
    let w = weights(m);
    let start = Instant::now();
    let model = DeviceModel::new(0, w.as_f32(), m.kernels)
        .unwrap_or_else(|e| panic!("{}: loading on the device: {e}", m.name));
    eprintln!(
        "{}: {} kernels compiled and {} MB of weights uploaded in {:.2} s",
        m.name,
        m.kernels.len(),
        m.weights_bytes / 1_000_000,
        start.elapsed().as_secs_f64()
    );
    MODES
        .iter()
        .map(|&mode| {
            let mut ctx = DeviceContext::new(&model, m.arena_bytes, m.inputs)
                .unwrap_or_else(|e| panic!("{}: context: {e}", m.name));
            ctx.use_graph(mode.graph);
            ctx.use_cublas(mode.cublas)
                .unwrap_or_else(|e| panic!("{}: cuBLAS: {e}", m.name));
            let mut outs: Vec<Vec<f32>> = m
                .output_regions
                .iter()
                .map(|&(_, len)| vec![0.0; len])
                .collect();
            let mut times = Vec::with_capacity(runs);
            for _ in 0..runs.max(1) {
                let mut views: Vec<&mut [f32]> = outs.iter_mut().map(|o| &mut o[..]).collect();
                let t = Instant::now();
                ctx.run_host(&model, inputs, &mut views, m.output_regions, m.launch_all)
                    .unwrap_or_else(|e| panic!("{} ({mode:?}): {e}", m.name));
                times.push(t.elapsed().as_secs_f64() * 1e3);
            }
            // The first run compiles nothing but may capture the graph: leave it out.
            let mut steady = times[1.min(times.len() - 1)..].to_vec();
            steady.sort_by(f64::total_cmp);
            eprintln!(
                "{}: {} steps, {mode:?}: median {:.3} ms over {} runs (first {:.3} ms)",
                m.name,
                m.steps.len(),
                steady[steady.len() / 2],
                steady.len(),
                times[0]
            );
            (mode, outs)
        })
        .collect()
}

fn zoo_model(name: &str) {
    let m = zoo(name);
    let dir = data_dir(m);
    let x = load_npy(&dir.join("random_input_0.npy"));
    assert_eq!(x.shape, m.inputs[0].shape, "{name}: input shape");
    for (mode, outs) in on_device(m, &[&x.data], 20) {
        check_zoo_outputs(name, &dir, &outs, &format!("{mode:?}"));
    }
}

macro_rules! zoo_tests {
    ($($name:ident),* $(,)?) => {
        $(#[test]
        #[ignore = "needs an NVIDIA GPU: run with -- --ignored"]
        fn $name() {
            zoo_model(stringify!($name));
        })*
    };
}

zoo_tests!(
    alexnet,
    densenet121,
    inception_v1,
    inception_v2,
    resnet50,
    shufflenet,
    squeezenet,
    vgg19,
    zfnet512,
);

fn against_cpu(m: &CudaModel, cpu: &[f32], x: &[f32]) {
    for (mode, outs) in on_device(m, &[x], 20) {
        assert_eq!(outs.len(), 1);
        let (max, ok) = compare(&outs[0], cpu, 1e-5, 1e-4);
        eprintln!(
            "{} {mode:?}: max |diff| {max:.3e} from the CPU target",
            m.name
        );
        assert!(
            ok,
            "{} ({mode:?}): differs from the CPU target: max |diff| {max:e}",
            m.name
        );
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with -- --ignored"]
fn tiny_matches_cpu_target() {
    use kiln_cuda_check::generated::tiny_cpu;
    let m = small("tiny_cuda");
    let x = input(m.inputs[0].len(), 1);
    let model = tiny_cpu::Model::load(cpu_weights_path(m)).unwrap();
    let mut ctx = tiny_cpu::Context::new();
    let out = model.run(&mut ctx, tiny_cpu::Inputs { x: &x }).unwrap();
    against_cpu(m, out.prob, &x);
}

/// The model whose Gemm steps cuBLAS takes (`tests/launches.rs` checks that they are).
#[test]
#[ignore = "needs an NVIDIA GPU: run with -- --ignored"]
fn gemms_match_cpu_target() {
    use kiln_cuda_check::generated::gemms_cpu;
    let m = small("gemms_cuda");
    let x = input(m.inputs[0].len(), 3);
    let model = gemms_cpu::Model::load(cpu_weights_path(m)).unwrap();
    let mut ctx = gemms_cpu::Context::new();
    let out = model.run(&mut ctx, gemms_cpu::Inputs { x: &x }).unwrap();
    against_cpu(m, out.y, &x);
}

/// SiLU as a standalone Swish step and fused into a convolution.
#[test]
#[ignore = "needs an NVIDIA GPU: run with -- --ignored"]
fn silu_matches_cpu_target() {
    use kiln_cuda_check::generated::silu_cpu;
    let m = small("silu_cuda");
    let x = input(m.inputs[0].len(), 4);
    let model = silu_cpu::Model::load(cpu_weights_path(m)).unwrap();
    let mut ctx = silu_cpu::Context::new();
    let out = model.run(&mut ctx, silu_cpu::Inputs { x: &x }).unwrap();
    against_cpu(m, out.y, &x);
}

/// GELU from its Erf spelling and as ONNX's tanh `Gelu`.
#[test]
#[ignore = "needs an NVIDIA GPU: run with -- --ignored"]
fn gelu_matches_cpu_target() {
    use kiln_cuda_check::generated::gelu_cpu;
    let m = small("gelu_cuda");
    let x = input(m.inputs[0].len(), 5);
    let model = gelu_cpu::Model::load(cpu_weights_path(m)).unwrap();
    let mut ctx = gelu_cpu::Context::new();
    let out = model.run(&mut ctx, gelu_cpu::Inputs { x: &x }).unwrap();
    against_cpu(m, out.y, &x);
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with -- --ignored"]
fn kitchen_sink_matches_cpu_target() {
    use kiln_cuda_check::generated::kitchen_sink_cpu;
    let m = small("kitchen_sink_cuda");
    let x = input(m.inputs[0].len(), 2);
    let model = kitchen_sink_cpu::Model::load(cpu_weights_path(m)).unwrap();
    let mut ctx = kitchen_sink_cpu::Context::new();
    let out = model
        .run(&mut ctx, kitchen_sink_cpu::Inputs { x: &x })
        .unwrap();
    against_cpu(m, out.out, &x);
}
