kiln_macros::include_model!("/models/tiny.onnx");

fn main() {}
