//! Like `compile_bytes`, but the first 8 bytes give `--input` shapes, so models whose
//! inputs have symbolic dims (most node tests and exporters) get past "dim is symbolic"
//! into inference, lowering and planning, and fixed dims can be overridden with odd ones
//! (0, 1, mismatched ranks).
//!
//! Layout: `[pool: 8 bytes][model bytes]`. Graph input `i` gets the declared rank (or
//! `pool[i] % 5` when it declares no shape) and dim `j` = `pool[(i + j) % 8] % 6`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "declared.rs"]
mod declared;

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let (pool, model) = data.split_at(8);
    let Ok(proto) = kiln_compiler::load::parse_model(model) else {
        return;
    };
    let mut opts = kiln_compiler::Options::default();
    for (i, vi) in proto.graph.input.iter().enumerate().take(16) {
        let declared = declared::declared_rank(vi);
        let rank = declared.unwrap_or(pool[i % 8] as usize % 5).min(8);
        let dims: Vec<usize> = (0..rank).map(|j| pool[(i + j) % 8] as usize % 6).collect();
        opts.input_dims
            .push((vi.name.clone(), kiln_compiler::dim::dims_of(&dims)));
    }
    let _ = kiln_compiler::compile_bytes(model, "fuzz.onnx", "fuzz", &opts);
});
