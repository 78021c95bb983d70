// The model path alone: the module is named after the file (`tiny`), the weights are
// embedded, and `Model::new()` needs no file at run time.
kiln_macros::include_model!("tests/fixtures/tiny.onnx");

fn main() -> Result<(), kiln_runtime::Error> {
    let model = tiny::Model::new()?;
    let mut ctx = tiny::Context::new();
    let x = vec![0.5f32; 3 * 8 * 8];
    let out = model.run(&mut ctx, tiny::Inputs { x: &x })?;
    assert_eq!(out.prob.len(), 4);
    let sum: f32 = out.prob.iter().sum();
    assert!((sum - 1.0).abs() < 1e-5, "softmax sums to {sum}");
    assert_eq!(tiny::INPUTS[0].shape, [1, 3, 8, 8]);
    Ok(())
}
