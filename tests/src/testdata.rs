//! Reading and comparing `testdata/` (made by `scripts/make_testdata.py`), shared by
//! the test crates: `kiln-tests` has it as a module, `tests/cuda-check` includes this
//! file by path. `KILN_TESTDATA_MISSING` is set by each crate's build script.

use std::path::Path;

/// Fails with instructions when the test data was never generated.
pub fn require_testdata() {
    let missing = env!("KILN_TESTDATA_MISSING");
    assert!(
        missing.is_empty(),
        "no test data in {missing}: run `bash .ci/run` (or scripts/setup-python.sh and \
         .venv/bin/python scripts/make_testdata.py) first"
    );
}

pub fn load_npy(path: &Path) -> kiln_compiler::npy::Array {
    kiln_compiler::npy::read_f32(path).unwrap_or_else(|e| panic!("{e}"))
}

/// Largest absolute difference and whether every element satisfies
/// `|got - want| <= atol + rtol * |want|`.
pub fn compare(got: &[f32], want: &[f32], atol: f32, rtol: f32) -> (f32, bool) {
    assert_eq!(got.len(), want.len(), "output length");
    let mut max = 0.0f32;
    let mut ok = true;
    for (&g, &w) in got.iter().zip(want) {
        let d = (g - w).abs();
        max = max.max(d);
        // NaN fails too: it is not within any tolerance.
        if d.is_nan() || d > atol + rtol * w.abs() {
            ok = false;
        }
    }
    (max, ok)
}

/// Index of the logits among a random variant's outputs, from its `meta.json`.
pub fn logits_index(dir: &Path) -> usize {
    let meta = std::fs::read_to_string(dir.join("meta.json")).expect("meta.json");
    let at = meta
        .find("\"logits_output_index\":")
        .expect("logits_output_index in meta.json");
    let rest = meta[at + 22..].trim_start();
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().expect("logits_output_index is a number")
}
