kiln_macros::include_model!("tests/fixtures/tiny.onnx", name = a, colour = red);

kiln_macros::include_model!("tests/fixtures/tiny.onnx", name = b, name = c);

// Two bad arguments in one call are reported together.
kiln_macros::include_model!(
    "tests/fixtures/tiny.onnx",
    name = d,
    weights = lazy,
    target = tpu
);

kiln_macros::include_model!("tests/fixtures/tiny.onnx", name = e, alignment = "64");

kiln_macros::include_model!(
    "tests/fixtures/tiny.onnx",
    name = f,
    input(x = [1, 3, 8, 8])
);

kiln_macros::include_model!(
    "tests/fixtures/tiny.onnx",
    name = g,
    input("x" = [1, -3, 8, 8])
);

kiln_macros::include_model!("tests/fixtures/tiny.onnx", name = g2, input("x"));

kiln_macros::include_model!("tests/fixtures/tiny.onnx", name = "h");

kiln_macros::include_model!("tests/fixtures/tiny.onnx", name = i, alignment);

kiln_macros::include_model!("tests/fixtures/tiny.onnx", name = j, winograd = "no");

fn main() {}
