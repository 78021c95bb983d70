//! The nine ONNX model-zoo architectures, compiled by Kiln, run, and compared with
//! outputs Kiln did not produce:
//! - `model.onnx` (every weight 0.02) against ONNX's own expected output;
//! - `random.onnx` (seeded random weights, scaled by fan-in) against onnxruntime, on
//!   the softmax output and on the logits before it.
//!
//! - `two_branches` (made by `make_testdata.py`) against onnxruntime: a model whose
//!   memory-aware schedule Kiln keeps.
//!
//! Tolerances: ONNX's backend test uses rtol 1e-3, atol 1e-7 for these models; we use
//! rtol 1e-3, atol 1e-6 there. Against onnxruntime, a float32 implementation that sums
//! in another order: logits within 1e-3 · max(1, max|ref|), probabilities within 1e-4.

use std::path::Path;

use kiln_tests::{bytes, compare, find, load_npy, logits_index};

fn check(name: &str) {
    // The original: ONNX's expected output, with ONNX's own backend-test tolerance.
    let model = find(name);
    run_and_compare(model, "input_0.npy", &["expected_0.npy"], 1, |_, _| {
        (1e-6, 1e-3)
    });
    check_random(name, 1);
}

/// The variant with random weights against onnxruntime, run with `threads` threads;
/// logits within a tolerance relative to their scale.
fn check_random(name: &str, threads: usize) {
    let dir = Path::new(find(name).dir);
    let random = find(&format!("{name}_random"));
    let logits = logits_index(dir);
    let expected: Vec<String> = (0..random.outputs.len())
        .map(|i| format!("random_expected_{i}.npy"))
        .collect();
    let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    run_and_compare(
        random,
        "random_input_0.npy",
        &expected,
        threads,
        |i, want| {
            if i == logits {
                let scale = want.iter().fold(1.0f32, |m, v| m.max(v.abs()));
                (1e-3 * scale, 0.0)
            } else {
                (1e-4, 0.0)
            }
        },
    );
}

fn run_and_compare(
    model: &kiln_tests::ZooModel,
    input: &str,
    expected: &[&str],
    threads: usize,
    tolerance: impl Fn(usize, &[f32]) -> (f32, f32),
) {
    let dir = Path::new(model.dir);
    let x = load_npy(&dir.join(input));
    assert_eq!(
        x.shape, model.inputs[0].shape,
        "{}: input shape",
        model.name
    );
    let outs = (model.run)(model.weights, &[bytes(&x.data)], threads)
        .unwrap_or_else(|e| panic!("{}: {e}", model.name));
    assert_eq!(outs.len(), expected.len(), "{}: output count", model.name);
    for (i, (got, file)) in outs.iter().zip(expected).enumerate() {
        let want = load_npy(&dir.join(file));
        let (atol, rtol) = tolerance(i, &want.data);
        let (max, ok) = compare(got, &want.data, atol, rtol);
        eprintln!(
            "{:<24} output {i} ({file}), {threads} thread(s): max |diff| {max:.3e} (atol {atol:.1e}, rtol {rtol:.0e})",
            model.name
        );
        assert!(
            ok,
            "{}: output {i} differs from {file}: max |diff| {max:e}",
            model.name
        );
    }
}

macro_rules! zoo_tests {
    ($($name:ident),*) => {
        $(#[test] fn $name() { check(stringify!($name)); })*

        /// Every model again with a context of two threads (products split by rows or
        /// columns, convolution blocks unfolded on each thread): the same tolerances
        /// against onnxruntime as one thread.
        #[test]
        fn every_model_at_two_threads() {
            $(check_random(stringify!($name), 2);)*
        }
    };
}

/// Two parallel branches the file lists breadth-first: Kiln runs them one after the
/// other (a smaller arena) and still matches onnxruntime, within 1e-4 + 1e-3 · |ref|
/// (sums of up to 144 products in another order; |y| is at most about 10).
#[test]
fn two_branches() {
    let model = find("two_branches");
    assert_eq!(model.schedule, "memory-aware");
    run_and_compare(model, "input_0.npy", &["expected_0.npy"], 1, |_, _| {
        (1e-4, 1e-3)
    });
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
    zfnet512
);

/// The plan never needs more than naive allocation and never less than the liveness
/// lower bound with its in-place aliases, itself at most the bound without them.
/// ResNet-50's shortcut convolutions (the residual Sum and Relu fused in) write over
/// their residual, so its arena is below the bound without aliasing.
#[test]
fn arena_between_lower_bound_and_naive() {
    kiln_tests::require_testdata();
    assert_eq!(
        kiln_tests::zoo::MODELS.len(),
        19,
        "every model and its random variant, and two_branches"
    );
    for m in kiln_tests::zoo::MODELS {
        assert!(
            m.in_place_lower_bound_bytes <= m.arena_bytes && m.arena_bytes <= m.naive_bytes,
            "{}",
            m.name
        );
        assert!(
            m.in_place_lower_bound_bytes <= m.lower_bound_bytes,
            "{}",
            m.name
        );
        if m.name.starts_with("resnet50") {
            assert!(m.arena_bytes < m.lower_bound_bytes, "{}", m.name);
        }
    }
}

/// Issue 9's goal, kept: on every zoo model the arena (conv scratch included) is at or
/// under the liveness lower bound without aliasing, and the geometric mean of arena /
/// bound over the nine is at most 0.81 (0.789 when this was written: in-place aliases,
/// Concat slices, segment overlaps and the schedule; 0.805 since Winograd F(4×4), whose
/// blocks of 16 tiles hold 36 products a tile where F(2×2)'s hold 16: Inception v1's
/// and v2's arenas grew by 0.24 MiB, 7 %, at their 28×28 layers, for 8 % and 7 % of
/// their time; blocks of 8 tiles were 40–60 % slower). A plan change that loses memory
/// fails here; `cargo bench -p kiln-compiler --bench plan` prints the table.
#[test]
fn zoo_arenas_are_under_the_bound() {
    kiln_tests::require_testdata();
    let zoo: Vec<_> = kiln_tests::zoo::MODELS
        .iter()
        .filter(|m| m.random)
        .collect();
    assert_eq!(zoo.len(), 9);
    let mut log_sum = 0.0;
    for m in &zoo {
        let ratio = m.arena_bytes as f64 / m.lower_bound_bytes as f64;
        eprintln!("{:<24} arena / bound {ratio:.3}", m.name);
        assert!(ratio <= 1.0, "{}: {ratio}", m.name);
        log_sum += ratio.ln();
    }
    let geomean = (log_sum / zoo.len() as f64).exp();
    assert!(geomean <= 0.81, "geometric mean {geomean:.3}");
}
