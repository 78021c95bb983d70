// Errors about an input point at the `input(...)` that names it.
kiln_macros::include_model!(
    "tests/fixtures/tiny.onnx",
    name = a,
    input("data" = [1, 3, 8, 8])
);

kiln_macros::include_model!(
    "tests/fixtures/batch.onnx",
    name = b,
    input("x" = [1, 3, 8])
);

kiln_macros::include_model!(
    "tests/fixtures/tiny.onnx",
    name = c,
    input("x" = [1, 4, 8, 8])
);

kiln_macros::include_model!(
    "tests/fixtures/tiny.onnx",
    name = d,
    input("x" = [1, 3, 8, 8]),
    input("x" = [1, 3, 8, 8])
);

fn main() {}
