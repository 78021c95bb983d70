//! The build.rs-compiled SqueezeNet against onnxruntime: `random_expected_0.npy` (the
//! softmax output) and `random_expected_1.npy` (the logits) are onnxruntime 1.31.1's
//! outputs on `random_input_0.npy` (testdata/README). Tolerances as there: probabilities
//! within 1e-4 absolute, logits within 1e-3 * max(1, max|reference|).

#[cfg(kiln_no_testdata)]
#[test]
fn squeezenet_matches_onnxruntime() {
    panic!(
        "{} is missing: make the test data with .ci/run, or with \
         scripts/setup-python.sh && .venv/bin/python scripts/make_testdata.py \
         (KILN_TESTDATA names another testdata directory)",
        env!("KILN_MISSING_MODEL")
    );
}

#[cfg(not(kiln_no_testdata))]
#[test]
fn squeezenet_matches_onnxruntime() {
    use kiln_build_user::squeezenet;
    use kiln_compiler::npy;
    use std::path::Path;

    let dir = Path::new(env!("KILN_SQUEEZENET_DIR"));
    let load = |name: &str| {
        npy::read_f32(&dir.join(name))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.join(name).display()))
    };
    let x = load("random_input_0.npy");
    let prob = load("random_expected_0.npy");
    let logits = load("random_expected_1.npy");

    // Weights embedded by include_bytes! (the Builder's default).
    let model = squeezenet::Model::new().expect("embedded weights");
    let mut ctx = squeezenet::Context::new();
    let out = model
        .run(&mut ctx, squeezenet::Inputs { data_0: &x.data })
        .expect("run");

    let max_diff = |got: &[f32], want: &[f32]| {
        assert_eq!(got.len(), want.len());
        got.iter()
            .zip(want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max)
    };
    let d = max_diff(out.softmaxout_1, &prob.data);
    assert!(d <= 1e-4, "probabilities: max |got - want| = {d}");
    let tol = 1e-3 * logits.data.iter().fold(1.0f32, |m, v| m.max(v.abs()));
    let d = max_diff(out.r65, &logits.data);
    assert!(d <= tol, "logits: max |got - want| = {d}, tolerance {tol}");
    // The same model picks the same class.
    let argmax = |v: &[f32]| (0..v.len()).max_by(|&a, &b| v[a].total_cmp(&v[b])).unwrap();
    assert_eq!(argmax(out.softmaxout_1), argmax(&prob.data));
}
