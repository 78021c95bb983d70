// RandomNormalLike and RandomUniformLike are not supported by Kiln: one error lists both.
kiln_macros::include_model!("tests/fixtures/unsupported.onnx");

fn main() {}
