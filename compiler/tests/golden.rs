//! Golden snapshots of generated code: the tiny classifier compiled for a fixed batch,
//! over a declared batch range (`batch=1..8`), and over it with `--opt batch=2`, kept in `tests/golden/` so that a
//! change to what Kiln writes shows in review. The compile must reproduce each file
//! byte for byte; `KILN_UPDATE_GOLDEN=1 cargo test -p kiln-compiler --test golden`
//! rewrites them after an intended change.

mod common;

use std::path::Path;

use common::tiny_classifier;
use kiln_compiler::Options;

fn check(file: &str, opts: &Options) {
    let bytes = tiny_classifier(true).bytes();
    let code = kiln_compiler::compile_bytes(&bytes, "tiny_classifier.onnx", "tiny", opts)
        .unwrap_or_else(|e| panic!("{file}: {e}"))
        .code;
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(file);
    if std::env::var_os("KILN_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &code).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; KILN_UPDATE_GOLDEN=1 writes it", path.display()));
    if code != want {
        let line = code
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .map_or_else(|| "the length".to_owned(), |i| format!("line {}", i + 1));
        panic!(
            "{file}: the generated code differs from tests/golden/{file} at {line}; if the \
             change is intended, rerun with KILN_UPDATE_GOLDEN=1 and review the diff"
        );
    }
}

/// Batch 2, every dim fixed: constant offsets and parameters.
#[test]
fn tiny_classifier_fixed() {
    let opts = Options {
        input_dims: vec![(
            "x".into(),
            kiln_compiler::parse_input_spec("x=2x3x8x8").unwrap().1,
        )],
        ..Options::default()
    };
    check("tiny_classifier_fixed.rs", &opts);
}

/// `batch=1..8`: `Dims`, the layout computed at run time, parameters in `s.batch`.
#[test]
fn tiny_classifier_over_batch() {
    let opts = Options {
        symbol_ranges: vec![kiln_compiler::parse_dim_spec("batch=1..8").unwrap()],
        ..Options::default()
    };
    check("tiny_classifier_over_batch.rs", &opts);
}

/// `batch=1..8` with `--opt batch=2`: the same module plus `mod opt`, the steps of a
/// build at batch 2 alone, which `execute` takes at exactly those dims.
#[test]
fn tiny_classifier_over_batch_opt() {
    let opts = Options {
        symbol_ranges: vec![kiln_compiler::parse_dim_spec("batch=1..8").unwrap()],
        opt_dims: vec![("batch".into(), 2)],
        ..Options::default()
    };
    check("tiny_classifier_over_batch_opt.rs", &opts);
}
