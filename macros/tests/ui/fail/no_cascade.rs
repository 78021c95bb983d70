// A model that fails to compile still declares its module, as a stub: the code using it
// adds no errors, so the one that matters is not buried.
kiln_macros::include_model!("tests/fixtures/unsupported.onnx");

fn main() -> Result<(), kiln_runtime::Error> {
    let model = unsupported::Model::new()?;
    let mut ctx = unsupported::Context::new();
    let x = [0.0f32; 4];
    let out = model.run(&mut ctx, unsupported::Inputs { x: &x })?;
    println!(
        "{:?} {}",
        out.y,
        unsupported::ARENA_BYTES + unsupported::INPUTS.len()
    );
    Ok(())
}
