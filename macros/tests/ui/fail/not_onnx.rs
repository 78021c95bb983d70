kiln_macros::include_model!("tests/fixtures/not_onnx.onnx");

fn main() {}
