// Checked by the compiler library, reported at the argument.
kiln_macros::include_model!("tests/fixtures/tiny.onnx", alignment = 48);

fn main() {}
