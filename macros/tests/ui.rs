//! trybuild UI tests of `include_model!`: cases that must build and run (`ui/pass`), and
//! cases that must fail with the error in their `.stderr` snapshot (`ui/fail`).
//! `TRYBUILD=overwrite cargo test -p kiln-macros --test ui` re-blesses the snapshots;
//! rust-toolchain.toml pins the compiler, so rustc's rendering stays the same.

use std::process::Command;

/// trybuild builds each case as a crate of its own under `target/tests/trybuild/`, where
/// `CARGO_MANIFEST_DIR` would not lead to `tests/fixtures/`; the macro reads this
/// override first (dtolnay/trybuild#202).
const OVERRIDE: &str = "KILN_MANIFEST_DIR_OVERRIDE";

#[test]
fn ui() {
    if std::env::var_os(OVERRIDE).is_none() {
        // `std::env::set_var` is unsafe in edition 2024 (another thread may be reading
        // the environment), so this test runs itself again with the variable set.
        let exe = std::env::current_exe().expect("the test binary's path");
        let status = Command::new(exe)
            .args(["ui", "--exact", "--nocapture", "--test-threads=1"])
            .env(OVERRIDE, env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("running the UI tests");
        assert!(
            status.success(),
            "the UI tests failed: see the output above"
        );
        return;
    }
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
