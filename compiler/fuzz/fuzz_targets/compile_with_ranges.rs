//! Builds over declared ranges (`--dim`): the first 8 bytes make one axis of each graph
//! input a symbol with a range, so the model goes through the dynamic path (symbolic
//! inference, planning over the ranges, lowering at several points, merging the code
//! of each step); the other dims are fixed as in `compile_with_dims`.
//!
//! Layout: `[pool: 8 bytes][model bytes]`. Graph input `i` gets the declared rank (or
//! `pool[i] % 4 + 1`), dim `j` = `pool[(i + j) % 8] % 6 + 1`, except axis
//! `pool[i] % rank`, which is symbol `S{k}` for `k = pool[(i + 3) % 8] % 2` (two inputs
//! may share one); `S0` ranges over `1..=pool[6] % 9 + 1`, `S1` over
//! `2..=pool[7] % 7 + 2`, on a step of 1 or 2.
#![no_main]

use kiln_compiler::dim::{Dim, SymbolRange};
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
    let mut used = [false; 2];
    for (i, vi) in proto.graph.input.iter().enumerate().take(8) {
        let declared = declared::declared_rank(vi);
        let rank = declared.unwrap_or(pool[i % 8] as usize % 4 + 1).min(6);
        let mut dims: Vec<Dim> = (0..rank)
            .map(|j| Dim::from(pool[(i + j) % 8] as usize % 6 + 1))
            .collect();
        if rank > 0 {
            let k = pool[(i + 3) % 8] as usize % 2;
            dims[pool[i] as usize % rank] = Dim::sym(["S0", "S1"][k]);
            used[k] = true;
        }
        opts.input_dims.push((vi.name.clone(), dims));
    }
    let step = u64::from(pool[5] % 2) + 1;
    if used[0] {
        let mut r = SymbolRange::new("S0", 1, u64::from(pool[6] % 9) + 1);
        r.step = step;
        opts.symbol_ranges.push(r);
    }
    if used[1] {
        opts.symbol_ranges
            .push(SymbolRange::new("S1", 2, u64::from(pool[7] % 7) + 2));
    }
    let _ = kiln_compiler::compile_bytes(model, "fuzz.onnx", "fuzz", &opts);
});
