// One module for every batch of 1..=4 (`x` is [N, 3, 8, 8]), beside a build for one
// batch of 3: the same outputs at N = 3, and any N in the range runs.
kiln_macros::include_model!(
    "tests/fixtures/batch.onnx",
    name = any_batch,
    input("x" = [N, 3, 8, 8]),
    dim = "N=1..4",
);

kiln_macros::include_model!("tests/fixtures/batch.onnx", name = batch3, input("x" = [3, 3, 8, 8]));

fn main() -> Result<(), kiln_runtime::Error> {
    assert_eq!(any_batch::SYMBOLS[0].name, "N");
    assert_eq!(any_batch::DIMS_MAX, any_batch::Dims { n: 4 });
    let model = any_batch::Model::new()?;
    let x: Vec<f32> = (0..4 * 3 * 8 * 8).map(|i| (i % 17) as f32 / 17.0 - 0.5).collect();
    let dims = any_batch::Dims { n: 3 };
    let mut ctx = any_batch::Context::with_dims(&dims)?;
    assert!(any_batch::arena_bytes(&dims)? <= any_batch::ARENA_BYTES_MAX);
    let out = model.run(&mut ctx, dims, any_batch::Inputs { x: &x[..3 * 192] })?;
    assert_eq!(dims.output_shape(0)?, [3, 4]);
    let fixed = batch3::Model::new()?;
    let mut c3 = batch3::Context::new();
    let want = fixed.run(&mut c3, batch3::Inputs { x: &x[..3 * 192] })?;
    assert_eq!(out.prob, want.prob);
    for n in 1..=4 {
        let dims = any_batch::Dims { n };
        let mut ctx = any_batch::Context::new();
        let out = model.run(&mut ctx, dims, any_batch::Inputs { x: &x[..n * 192] })?;
        assert_eq!(out.prob.len(), n * 4);
    }
    // Out of range: an error naming the symbol, the input and the axis.
    let e = any_batch::Dims { n: 5 }.check().unwrap_err();
    assert_eq!(
        e.to_string(),
        "symbol `N` (input `x`, axis 0) is 5, outside its declared range 1..=4"
    );
    Ok(())
}
