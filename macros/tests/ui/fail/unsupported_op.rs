// Erf and Sin are not lowered by Kiln: one error lists both.
kiln_macros::include_model!("tests/fixtures/unsupported.onnx");

fn main() {}
