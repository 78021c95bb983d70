//! The nine ONNX model-zoo architectures, compiled by Kiln, run, and compared with
//! outputs Kiln did not produce:
//! - `model.onnx` (every weight 0.02) against ONNX's own expected output;
//! - `random.onnx` (seeded random weights, scaled by fan-in) against onnxruntime, on
//!   the softmax output and on the logits before it.
//!
//! Tolerances: ONNX's backend test uses rtol 1e-3, atol 1e-7 for these models; we use
//! rtol 1e-3, atol 1e-6 there. Against onnxruntime, a float32 implementation that sums
//! in another order: logits within 1e-3 · max(1, max|ref|), probabilities within 1e-4.

use std::path::Path;

use kiln_tests::{bytes, compare, find, load_npy};

fn check(name: &str) {
    for (model, input, expected, logits_tol) in [
        (find(name), "input_0.npy", vec!["expected_0.npy"], None),
        (
            find(&format!("{name}_random")),
            "random_input_0.npy",
            vec!["random_expected_0.npy", "random_expected_1.npy"],
            Some(1e-3f32),
        ),
    ] {
        let dir = Path::new(model.dir);
        let x = load_npy(&dir.join(input));
        assert_eq!(x.shape, model.inputs[0].shape, "{}: input shape", model.name);
        let outs = (model.run)(model.weights, &[bytes(&x.data)]).unwrap_or_else(|e| panic!("{}: {e}", model.name));
        assert_eq!(outs.len(), expected.len(), "{}: output count", model.name);
        for (i, (got, file)) in outs.iter().zip(&expected).enumerate() {
            let want = load_npy(&dir.join(file));
            let (atol, rtol) = match (i, logits_tol) {
                (0, None) => (1e-6, 1e-3),
                (0, Some(_)) => (1e-4, 0.0),
                (_, Some(t)) => {
                    let scale = want.data.iter().fold(1.0f32, |m, v| m.max(v.abs()));
                    (t * scale, 0.0)
                }
                (_, None) => unreachable!(),
            };
            let (max, ok) = compare(got, &want.data, atol, rtol);
            eprintln!(
                "{:<24} output {i} ({file}): max |diff| {max:.3e} (atol {atol:.1e}, rtol {rtol:.0e})",
                model.name
            );
            assert!(ok, "{}: output {i} differs from {file}: max |diff| {max:e}", model.name);
        }
    }
}

macro_rules! zoo_tests {
    ($($name:ident),*) => {
        $(#[test] fn $name() { check(stringify!($name)); })*
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
    zfnet512
);

/// The plan never needs more than naive allocation and never less than the liveness
/// lower bound (no aliasing yet).
#[test]
fn arena_between_lower_bound_and_naive() {
    kiln_tests::require_testdata();
    assert_eq!(kiln_tests::zoo::MODELS.len(), 18, "every model and its random variant");
    for m in kiln_tests::zoo::MODELS {
        assert!(m.lower_bound_bytes <= m.arena_bytes && m.arena_bytes <= m.naive_bytes, "{}", m.name);
    }
}
