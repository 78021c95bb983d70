kiln_macros::include_model!("tests/fixtures/missing.onnx");

fn main() {}
