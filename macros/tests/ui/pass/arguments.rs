// Every argument, on a model whose batch dim is symbolic (`x` is [N, 3, 8, 8]).

/// A re-export of the runtime, as a crate wrapping Kiln would have.
mod rt {
    pub use kiln_runtime::*;
}

kiln_macros::include_model!(
    "tests/fixtures/batch.onnx",
    name = batch3,
    input("x" = [3, 3, 8, 8]),
    alignment = 64,
    weights = runtime,
    target = cpu,
    winograd = false,
    runtime = crate::rt,
);

// The same model with one item per batch, embedded; a trailing comma is fine.
kiln_macros::include_model!(
    "tests/fixtures/batch.onnx",
    name = batch1,
    input("x" = [1, 3, 8, 8]),
);

fn main() -> Result<(), kiln_runtime::Error> {
    assert_eq!(batch3::INPUTS[0].shape, [3, 3, 8, 8]);
    assert_eq!(batch3::OUTPUTS[0].shape, [3, 4]);
    assert_eq!(batch3::ARENA_BYTES % 64, 0);
    // weights = runtime: the file the macro wrote, read at run time.
    assert!(batch3::WEIGHTS_FILE.ends_with(".weights.bin"));
    let m3 = batch3::Model::load(batch3::WEIGHTS_FILE)?;
    let m1 = batch1::Model::new()?;

    let x: Vec<f32> = (0..3 * 3 * 8 * 8)
        .map(|i| (i % 17) as f32 / 17.0 - 0.5)
        .collect();
    let mut c3 = batch3::Context::new();
    let mut c1 = batch1::Context::new();
    let out3 = m3.run(&mut c3, batch3::Inputs { x: &x })?;
    for (b, row) in out3.prob.chunks(4).enumerate() {
        let one = m1.run(
            &mut c1,
            batch1::Inputs {
                x: &x[b * 192..(b + 1) * 192],
            },
        )?;
        for (p, q) in row.iter().zip(one.prob) {
            assert!((p - q).abs() < 1e-6, "batch item {b}: {p} vs {q}");
        }
    }
    Ok(())
}
