// `x` is [N, 3, 8, 8]: N needs a value, given with `input("x" = [...])`.
kiln_macros::include_model!("tests/fixtures/batch.onnx");

fn main() {}
