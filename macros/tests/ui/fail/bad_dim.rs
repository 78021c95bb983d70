// A range that starts at 0, and a symbol given twice: each error at its literal.
kiln_macros::include_model!(
    "tests/fixtures/batch.onnx",
    input("x" = [N, 3, 8, 8]),
    dim = "N=0..4",
);

kiln_macros::include_model!(
    "tests/fixtures/batch.onnx",
    name = twice,
    input("x" = [N, 3, 8, 8]),
    dim = "N=1..4",
    dim = "N=1..8",
);

fn main() {}
