// `--opt` outside its range, and a value that is not a number: each error at its literal.
kiln_macros::include_model!(
    "tests/fixtures/batch.onnx",
    input("x" = [N, 3, 8, 8]),
    dim = "N=1..4",
    opt = "N=9",
);

kiln_macros::include_model!(
    "tests/fixtures/batch.onnx",
    name = not_a_number,
    input("x" = [N, 3, 8, 8]),
    dim = "N=1..4",
    opt = "N=two",
);

fn main() {}
