//! Whole models through the generated CUDA modules' `launch_all`, run on the CPU by the
//! emulator of the CUDA kernels (`kiln_runtime::cuda::emulator`): the same `.cu`
//! sources compiled as C++, with the grids, blocks and arguments the GPU would get.
//!
//! - SqueezeNet and ShuffleNet (`random.onnx`) against onnxruntime's outputs, with the
//!   tolerances of `tests/tests/zoo.rs`: logits within 1e-3 · max(1, max|ref|),
//!   probabilities within 1e-4.
//! - The compiler tests' tiny classifier and kitchen sink against the CPU target's
//!   module of the same model (same weights file layout).
//!
//! The emulator runs at tens of MFLOP/s: SqueezeNet (~0.35 GFLOP) and ShuffleNet take
//! a while in a release build; each test prints its time.

use std::path::Path;
use std::time::Instant;

use kiln_cuda_check::{CudaModel, check_zoo_outputs, compare, input, load_npy, small, zoo};
use kiln_runtime::Weights;
use kiln_runtime::cuda::emulator::Emulator;

/// Runs `m` once in the emulator on `inputs` and returns its outputs.
fn emulate(m: &CudaModel, inputs: &[&[f32]]) -> Vec<Vec<f32>> {
    let path = m.weights.expect("a model the tests run has a weights file");
    let weights = Weights::from_file(path, m.weights_bytes).unwrap_or_else(|e| panic!("{e}"));
    // f32 elements, so the arena is aligned like the device's.
    let mut arena = vec![0.0f32; m.arena_bytes.div_ceil(4)];
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut arena);
    let start = Instant::now();
    {
        let mut emu = Emulator::new(bytes, weights.as_f32(), inputs);
        (m.launch_all)(&mut emu).unwrap_or_else(|e| panic!("{}: {e}", m.name));
    }
    eprintln!(
        "{}: {} steps emulated in {:.1} s",
        m.name,
        m.steps.len(),
        start.elapsed().as_secs_f64()
    );
    m.output_regions
        .iter()
        .map(|&(offset, len)| arena[offset / 4..offset / 4 + len].to_vec())
        .collect()
}

fn zoo_model(name: &str) {
    let m = zoo(name);
    let dir = Path::new(m.dir);
    let x = load_npy(&dir.join("random_input_0.npy"));
    assert_eq!(x.shape, m.inputs[0].shape, "{name}: input shape");
    let outs = emulate(m, &[&x.data]);
    check_zoo_outputs(name, dir, &outs, "emulator");
}

/// The weights file of the CPU twin of the small model `m`.
fn cpu_weights(m: &CudaModel) -> &'static str {
    m.cpu_weights.expect("a small model has a CPU twin")
}

#[test]
fn squeezenet() {
    zoo_model("squeezenet");
}

#[test]
fn shufflenet() {
    zoo_model("shufflenet");
}

fn against_cpu(m: &CudaModel, cpu: Vec<Vec<f32>>, x: &[f32]) {
    let got = emulate(m, &[x]);
    assert_eq!(got.len(), cpu.len());
    for (i, (g, want)) in got.iter().zip(&cpu).enumerate() {
        let (max, ok) = compare(g, want, 1e-5, 1e-4);
        eprintln!(
            "{} output {i}: max |diff| {max:.3e} from the CPU target",
            m.name
        );
        assert!(
            ok,
            "{}: output {i} differs from the CPU target: max |diff| {max:e}",
            m.name
        );
    }
}

#[test]
fn tiny_matches_cpu_target() {
    use kiln_cuda_check::generated::tiny_cpu;
    let m = small("tiny_cuda");
    let x = input(m.inputs[0].len(), 1);
    let model = tiny_cpu::Model::load(cpu_weights(m)).unwrap();
    let mut ctx = tiny_cpu::Context::new();
    let out = model.run(&mut ctx, tiny_cpu::Inputs { x: &x }).unwrap();
    against_cpu(m, vec![out.prob.to_vec()], &x);
}

/// SiLU (`x · Sigmoid(x)`) as a standalone Swish step and fused into a convolution.
#[test]
fn silu_matches_cpu_target() {
    use kiln_cuda_check::generated::silu_cpu;
    let m = small("silu_cuda");
    assert_eq!(
        m.steps.iter().map(|(_, op)| *op).collect::<Vec<_>>(),
        ["Swish", "Conv"],
        "both SiLUs rewritten, the second fused"
    );
    let x = input(m.inputs[0].len(), 4);
    let model = silu_cpu::Model::load(cpu_weights(m)).unwrap();
    let mut ctx = silu_cpu::Context::new();
    let out = model.run(&mut ctx, silu_cpu::Inputs { x: &x }).unwrap();
    against_cpu(m, vec![out.y.to_vec()], &x);
}

/// GELU from its Erf spelling (five nodes rewritten to one step) and as ONNX's tanh `Gelu`.
#[test]
fn gelu_matches_cpu_target() {
    use kiln_cuda_check::generated::gelu_cpu;
    let m = small("gelu_cuda");
    assert_eq!(
        m.steps.iter().map(|(_, op)| *op).collect::<Vec<_>>(),
        ["MatMul", "Gelu", "MatMul", "Gelu"],
        "the Erf spelling rewritten to one Gelu step"
    );
    let x = input(m.inputs[0].len(), 5);
    let model = gelu_cpu::Model::load(cpu_weights(m)).unwrap();
    let mut ctx = gelu_cpu::Context::new();
    let out = model.run(&mut ctx, gelu_cpu::Inputs { x: &x }).unwrap();
    against_cpu(m, vec![out.y.to_vec()], &x);
}

#[test]
fn kitchen_sink_matches_cpu_target() {
    use kiln_cuda_check::generated::kitchen_sink_cpu;
    let m = small("kitchen_sink_cuda");
    let x = input(m.inputs[0].len(), 2);
    let model = kitchen_sink_cpu::Model::load(cpu_weights(m)).unwrap();
    let mut ctx = kitchen_sink_cpu::Context::new();
    let out = model
        .run(&mut ctx, kitchen_sink_cpu::Inputs { x: &x })
        .unwrap();
    against_cpu(m, vec![out.out.to_vec()], &x);
}
