//! The macro-compiled model against onnxruntime: `models/tiny_cnn_expected_*.npy` are
//! onnxruntime 1.31.1's outputs (CPU, one thread) on `models/tiny_cnn_input.npy`, written
//! by `scripts/make_macro_fixtures.py`.
//!
//! Tolerances, as for the zoo models (testdata/README): probabilities within 1e-4
//! absolute; logits within 1e-3 * max(1, max|reference|), since another float32
//! implementation sums in another order.

use std::path::Path;

use kiln_compiler::npy;
use kiln_macro_user::{tiny_cnn, tiny_cnn_single};

fn load(name: &str) -> npy::Array {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models")
        .join(name);
    npy::read_f32(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn assert_close(what: &str, got: &[f32], want: &[f32], atol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let (i, diff) = got
        .iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .enumerate()
        .fold((0, 0.0f32), |m, (i, d)| if d > m.1 { (i, d) } else { m });
    assert!(
        diff <= atol,
        "{what}: |got - want| = {diff} at {i} ({} vs {}), tolerance {atol}",
        got[i],
        want[i]
    );
}

fn logits_tolerance(reference: &[f32]) -> f32 {
    1e-3 * reference.iter().fold(1.0f32, |m, v| m.max(v.abs()))
}

#[test]
fn batch_of_two_matches_onnxruntime() {
    let x = load("tiny_cnn_input.npy");
    let prob = load("tiny_cnn_expected_prob.npy");
    let logits = load("tiny_cnn_expected_logits.npy");
    assert_eq!(x.shape, tiny_cnn::INPUTS[0].shape);

    let model = tiny_cnn::Model::new().expect("embedded weights");
    let mut ctx = tiny_cnn::Context::new();
    let out = model
        .run(&mut ctx, tiny_cnn::Inputs { x: &x.data })
        .expect("run");
    assert_close("prob", out.prob, &prob.data, 1e-4);
    assert_close(
        "logits",
        out.logits,
        &logits.data,
        logits_tolerance(&logits.data),
    );
}

/// The same file compiled for one item: each row of the batch run on its own.
#[test]
fn single_item_matches_onnxruntime_row_by_row() {
    let x = load("tiny_cnn_input.npy");
    let prob = load("tiny_cnn_expected_prob.npy");
    let logits = load("tiny_cnn_expected_logits.npy");
    let model = tiny_cnn_single::Model::new().expect("embedded weights");
    let mut ctx = tiny_cnn_single::Context::new();
    let per_item = x.data.len() / 2;
    for b in 0..2 {
        let out = model
            .run(
                &mut ctx,
                tiny_cnn_single::Inputs {
                    x: &x.data[b * per_item..(b + 1) * per_item],
                },
            )
            .expect("run");
        let rows = b * 10..(b + 1) * 10;
        assert_close(
            &format!("prob[{b}]"),
            out.prob,
            &prob.data[rows.clone()],
            1e-4,
        );
        assert_close(
            &format!("logits[{b}]"),
            out.logits,
            &logits.data[rows.clone()],
            logits_tolerance(&logits.data[rows]),
        );
    }
}

/// The arguments reached the compiler: shapes from `input(...)`, offsets from
/// `alignment`, and a wrong input length is an error, not a panic.
#[test]
fn arguments_shape_the_module() {
    assert_eq!(tiny_cnn::INPUTS[0].shape, [2, 3, 16, 16]);
    assert_eq!(tiny_cnn::OUTPUTS[0].shape, [2, 10]);
    assert_eq!(tiny_cnn_single::INPUTS[0].shape, [1, 3, 16, 16]);
    assert_eq!(tiny_cnn_single::ARENA_BYTES % 64, 0);
    assert_eq!(tiny_cnn::WEIGHTS_BYTES, tiny_cnn_single::WEIGHTS_BYTES);

    let model = tiny_cnn_single::Model::new().unwrap();
    let mut ctx = tiny_cnn_single::Context::new();
    let short = vec![0.0f32; 10];
    assert!(
        model
            .run(&mut ctx, tiny_cnn_single::Inputs { x: &short })
            .is_err()
    );
}
