//! What the test crates' build scripts share (each includes this file by path): the
//! zoo models `scripts/make_testdata.py` writes and where `testdata/` is.

use std::path::{Path, PathBuf};

/// The nine ONNX model-zoo architectures, each a folder of `testdata/`.
pub const ZOO_MODELS: &[&str] = &[
    "alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
];

/// `$KILN_TESTDATA`, else the workspace's `testdata/`; asks cargo to rerun the build
/// script when either changes.
pub fn testdata_dir(workspace: &Path) -> PathBuf {
    let data = std::env::var_os("KILN_TESTDATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("testdata"));
    println!("cargo:rerun-if-env-changed=KILN_TESTDATA");
    println!("cargo:rerun-if-changed={}", data.display());
    data
}

/// A path as a string for generated code.
pub fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}
