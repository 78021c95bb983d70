//! Compiles SqueezeNet with seeded random weights (`testdata/squeezenet/random.onnx`, made
//! by `scripts/make_testdata.py`) into `$OUT_DIR/squeezenet.rs`, the way the README tells
//! users to: `Builder::new(..).name(..).input(..).compile()`.
//!
//! testdata/ is generated, not committed. Without it this crate still builds (no module,
//! `cfg(kiln_no_testdata)`), and its test fails saying how to make the data, rather than
//! breaking the whole workspace's build or passing vacuously.

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let data = std::env::var_os("KILN_TESTDATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join("../../testdata"));
    let model = data.join("squeezenet").join("random.onnx");
    println!("cargo:rerun-if-env-changed=KILN_TESTDATA");
    println!("cargo:rustc-check-cfg=cfg(kiln_no_testdata)");
    if !model.exists() {
        // Watching a missing file reruns this script on every build, until it appears.
        println!("cargo:rerun-if-changed={}", model.display());
        println!("cargo:rustc-cfg=kiln_no_testdata");
        println!("cargo:rustc-env=KILN_MISSING_MODEL={}", model.display());
        return;
    }
    println!(
        "cargo:rustc-env=KILN_SQUEEZENET_DIR={}",
        data.join("squeezenet").display()
    );
    // Prints cargo:rerun-if-changed for the model.
    kiln_compiler::Builder::new(&model)
        .name("squeezenet")
        .input("data_0", [1, 3, 224, 224])
        .compile()
        .unwrap();
}
