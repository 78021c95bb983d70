//! Any bytes through the whole compile (load, infer, passes, lower, schedule, plan,
//! codegen) with default options: an `Err` is fine, a panic, hang or huge allocation
//! is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = kiln_compiler::compile_bytes(data, "fuzz.onnx", "fuzz", &Default::default());
});
