//! Builds over declared ranges (`kiln compile --input x=1x3x48xW --dim W=32..2048`):
//! each case of `dynamic.json` (`scripts/make_dynamic_refs.py`) is compiled once by
//! `build.rs` and run at every one of its points, against onnxruntime on the same
//! inputs, and at the static build's shape, against the static build, bit for bit
//! (within tolerance where the two builds choose differently by shape: [`Static`]).
//! Every run's context holds exactly `arena_bytes(dims)`, and every arena region is
//! bounds-checked, so a kernel reaching past the arena its dims need fails the run.

use kiln_real_models::{
    DynamicCase, DynamicPoint, compare, decode, find, module_inputs, read_data, real_models,
    require_dynamic_data,
};

fn case(name: &str) -> &'static DynamicCase {
    require_dynamic_data();
    real_models::DYNAMIC
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| {
            panic!("{name} is not in dynamic.json; run scripts/make_dynamic_refs.py")
        })
}

/// The input tensors of point `p`.
fn point_inputs(p: &DynamicPoint) -> Vec<kiln_compiler::tensor::Tensor> {
    p.inputs
        .iter()
        .map(|f| read_data(f).unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

/// Runs `name` at every point and compares with onnxruntime (|kiln − ort| ≤ atol +
/// rtol·|ort| per element, shapes exact); returns `arena_bytes(dims)` per point.
fn check(name: &str, atol: f64, rtol: f64) {
    let c = case(name);
    let build = c
        .compiled
        .as_ref()
        .unwrap_or_else(|e| panic!("{name} does not compile: {e}"));
    let mut session =
        (build.load)(build.weights).unwrap_or_else(|e| panic!("{name}: loading: {e}"));
    for p in c.points {
        let inputs = point_inputs(p);
        let bytes: Vec<&[u8]> = inputs.iter().map(|t| t.data.bytes()).collect();
        let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape.as_slice()).collect();
        let run = session
            .run(&bytes, &shapes)
            .unwrap_or_else(|e| panic!("{name} at {:?}: {e}", p.values));
        assert!(
            run.arena_bytes <= build.arena_bytes_max,
            "{name}: arena above its max"
        );
        for (k, file) in p.outputs.iter().enumerate() {
            let want = read_data(file).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                run.shapes[k], want.shape,
                "{name} at {:?}: output {k}'s shape",
                p.values
            );
            let got =
                decode(&run.outputs[k], build.outputs[k].dtype).unwrap_or_else(|e| panic!("{e}"));
            let e = compare(&got, &want.as_f64(), atol, rtol);
            eprintln!(
                "{name:<18} {:<36} output {k}: max abs {:.3e}, worst at {:.3} of the tolerance; arena {} of {} ({:.3})",
                format!("{:?}", p.values),
                e.max_abs,
                e.used,
                run.arena_bytes,
                build.arena_bytes_max,
                run.arena_bytes as f64 / build.arena_bytes_max as f64
            );
            assert!(
                e.within,
                "{name} at {:?}: output {k} differs from onnxruntime beyond atol {atol:e} + rtol {rtol:e}: max abs {:e}",
                p.values, e.max_abs
            );
        }
    }
}

/// How a dynamic build's outputs at the static build's shape compare with the static
/// build's.
enum Static {
    /// The same bytes: the same kernels sum in the same order.
    Bits,
    /// Within `atol + rtol·|static|`: the static build chose a kernel by its one shape
    /// that a build over ranges cannot (Winograd F(4×4, 3×3), whose weights hold for
    /// one variant, or Winograd for 16 to 63 input channels; the dynamic build runs
    /// F(2×2) at every size, and those layers as direct or im2col).
    Within(f64, f64),
}

/// The dynamic build at the static build's shape gives the static build's outputs
/// (as `how` says), and needs no more arena (the plan keeps the order packed at the
/// largest dims, so it may need more than a plan made for that one shape; printed).
fn same_as_static(name: &str, how: Static) {
    let c = case(name);
    let build = c
        .compiled
        .as_ref()
        .unwrap_or_else(|e| panic!("{name} does not compile: {e}"));
    let (m, s) = find(c.model);
    let inputs = module_inputs(m, s).unwrap_or_else(|e| panic!("{e}"));
    let bytes: Vec<&[u8]> = inputs.iter().map(|t| t.data.bytes()).collect();
    let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape.as_slice()).collect();
    let mut dynamic = (build.load)(build.weights).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut fixed = (s.load)(s.weights).unwrap_or_else(|e| panic!("{}: {e}", c.model));
    let run = dynamic
        .run(&bytes, &shapes)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let want = fixed
        .run(&bytes)
        .unwrap_or_else(|e| panic!("{}: {e}", c.model));
    assert_eq!(run.outputs.len(), want.len());
    for (k, (a, b)) in run.outputs.iter().zip(&want).enumerate() {
        match how {
            Static::Bits => assert!(
                a == b,
                "{name}: output {k} is not bit-identical to the static build's"
            ),
            Static::Within(atol, rtol) => {
                let dtype = build.outputs[k].dtype;
                let [a, b] = [a, b].map(|x| decode(x, dtype).unwrap_or_else(|e| panic!("{e}")));
                let e = compare(&a, &b, atol, rtol);
                assert!(
                    e.within,
                    "{name}: output {k} differs from the static build's beyond atol {atol:e} + rtol {rtol:e}: max abs {:e}",
                    e.max_abs
                );
            }
        }
    }
    eprintln!(
        "{name}: at the static shape, arena {} (static build {}, max {})",
        run.arena_bytes, s.arena_bytes, build.arena_bytes_max
    );
}

/// CTC probabilities over widths 32 to 2048, one build (tolerance as for the static
/// build of the same model).
#[test]
fn rec_width_matches_onnxruntime() {
    check("rec_width", 1e-6, 1e-3);
    same_as_static("rec_width", Static::Bits);
}

/// Two symbols at once: batch and width.
#[test]
fn rec_batch_width_matches_onnxruntime() {
    check("rec_batch_width", 1e-6, 1e-3);
    same_as_static("rec_batch_width", Static::Bits);
}

/// Batches of 1 to 8 of a MobileNetV3 classifier (1 is not a sampled point: the code
/// made for 2..8 serves it).
#[test]
fn cls_batch_matches_onnxruntime() {
    check("cls_batch", 1e-6, 1e-3);
    same_as_static("cls_batch", Static::Bits);
}

/// The model's own `DynamicDimension.0` batch.
#[test]
fn orientation_batch_matches_onnxruntime() {
    check("orientation_batch", 1e-6, 1e-3);
    same_as_static("orientation_batch", Static::Bits);
}

/// A BERT-style encoder (MiniLM, int8 weights) at sequence lengths 1 to 512 and
/// batches of 1 and 2: its position indices (Range over the sequence, folded to a
/// constant in a fixed build) are computed at run time. Tolerance as for the static build.
#[test]
fn minilm_sequence_matches_onnxruntime() {
    check("minilm_sequence", 1e-5, 1e-4);
    same_as_static("minilm_sequence", Static::Bits);
}

/// An LSTM over 1 to 64 chunks: the sequence length reaches the recurrent kernel.
#[test]
fn vad_sequence_matches_onnxruntime() {
    check("vad_sequence", 1e-5, 1e-4);
    same_as_static("vad_sequence", Static::Bits);
}

/// A text detector (DB head over a ResNet-like backbone) at heights and widths from 32
/// to 960 on steps of 32, one build: its nearest-neighbour Resize builds its tap
/// tables at run time. At 32×32 the deepest stage is 1×1. Tolerance as for the static
/// build; against the static build too, whose 3×3 layers of 16 to 63 input channels
/// run as Winograd where this build's run as direct or im2col sums.
#[test]
fn det_height_width_matches_onnxruntime() {
    check("det_height_width", 1e-6, 3e-3);
    same_as_static("det_height_width", Static::Within(1e-6, 3e-3));
}

/// YOLOv8n at heights and widths from 64 to 640: its anchor grid (ConstantOfShape,
/// Range and Expand over the feature maps' shapes, folded in a fixed build) is
/// computed at run time, and the number of boxes follows the shape. Tolerance as
/// for the static build; against the static build too, whose layers of 16 or more
/// 4×4 tiles run as Winograd F(4×4) where this build's run as F(2×2).
#[test]
fn yolo_height_width_matches_onnxruntime() {
    check("yolo_height_width", 1e-5, 1e-5);
    same_as_static("yolo_height_width", Static::Within(1e-5, 1e-5));
}

/// The same detector with NonMaxSuppression and a Gather of the kept boxes in the
/// graph, over the same H×W: the number of boxes kept is the data's (0, 1, 1 and 3 at
/// the four points), planned at its bound and reported by the context after the run.
/// The kept indices and boxes are compared like the rest (indices exactly: they are
/// integers; the seeded images' scores stay 1.8e-4 from the threshold, see
/// make_dynamic_refs.py). Tolerance as for the static build.
#[test]
fn yolo_nms_height_width_matches_onnxruntime() {
    check("yolo_nms_height_width", 1e-5, 1e-5);
}

/// `--opt batch=1 --opt sequence=128` (MiniLM's static shape): a run at exactly those
/// dims takes the constant-shape path. It gives the static build's bytes in a context
/// of `ARENA_BYTES_OPT`, which is smaller than the general layout there, so only that
/// path can have run; any other dims take the general path, which gives the plain
/// dynamic build's bytes.
#[test]
fn minilm_opt_path_is_the_static_build() {
    let c = case("minilm_sequence");
    let plain = c.compiled.as_ref().unwrap_or_else(|e| panic!("{e}"));
    let o = c.opt.as_ref().expect("minilm_sequence is built with --opt");
    let at_opt = (o.arena_bytes_at_opt)().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        o.arena_bytes_opt < at_opt,
        "the constant-shape plan ({}) should be smaller than the general layout at {:?} ({at_opt})",
        o.arena_bytes_opt,
        o.dims,
    );
    let (m, s) = find(c.model);
    let inputs = module_inputs(m, s).unwrap_or_else(|e| panic!("{e}"));
    let bytes: Vec<&[u8]> = inputs.iter().map(|t| t.data.bytes()).collect();
    let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape.as_slice()).collect();
    let want = (s.load)(s.weights)
        .and_then(|mut f| f.run(&bytes))
        .unwrap_or_else(|e| panic!("{}: {e}", c.model));
    let mut for_opt = (o.load_for_opt)(o.weights).unwrap_or_else(|e| panic!("{e}"));
    let mut with_dims = (o.load)(o.weights).unwrap_or_else(|e| panic!("{e}"));
    for (what, session) in [("for_opt", &mut for_opt), ("with_dims", &mut with_dims)] {
        let run = session
            .run(&bytes, &shapes)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(run.outputs, want, "{what}: not the static build's bytes");
        assert_eq!(run.shapes[0], [1, 128, 384], "{what}: output shape");
    }
    // Elsewhere the general path, in both contexts it fits.
    let mut general = (plain.load)(plain.weights).unwrap_or_else(|e| panic!("{e}"));
    for p in c.points.iter().filter(|p| p.values != o.dims) {
        let inputs = point_inputs(p);
        let bytes: Vec<&[u8]> = inputs.iter().map(|t| t.data.bytes()).collect();
        let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape.as_slice()).collect();
        let want = general
            .run(&bytes, &shapes)
            .unwrap_or_else(|e| panic!("{:?}: {e}", p.values));
        let run = with_dims
            .run(&bytes, &shapes)
            .unwrap_or_else(|e| panic!("{:?}: {e}", p.values));
        assert_eq!(run.outputs, want.outputs, "{:?}", p.values);
        assert_eq!(run.shapes, want.shapes, "{:?}", p.values);
        match for_opt.run(&bytes, &shapes) {
            Ok(run) => assert_eq!(run.outputs, want.outputs, "{:?}", p.values),
            Err(e) => assert!(
                want.arena_bytes > o.arena_bytes_opt
                    && matches!(e, kiln_runtime::Error::ArenaTooSmall { .. }),
                "{:?}: {e}",
                p.values
            ),
        }
    }
    eprintln!(
        "minilm --opt {:?}: constant-shape arena {} B, general layout there {} B ({:.3}), max {} B",
        o.dims,
        o.arena_bytes_opt,
        at_opt,
        at_opt as f64 / o.arena_bytes_opt as f64,
        plain.arena_bytes_max
    );
}

/// Every error a run at given dims can meet, with its message.
#[test]
fn run_time_dims_are_checked() {
    let c = case("rec_width");
    let build = c.compiled.as_ref().unwrap_or_else(|e| panic!("{e}"));
    let mut s = (build.load)(build.weights).unwrap_or_else(|e| panic!("{e}"));
    let x = vec![0u8; 4 * 3 * 48 * 4000];
    let mut err = |shape: &[usize], len: usize| {
        s.run(&[&x[..len]], &[shape])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let n = |w: usize| 4 * 3 * 48 * w;
    assert_eq!(
        err(&[1, 3, 48, 4000], n(4000)),
        "symbol `W` (input `x`, axis 3) is 4000, outside its declared range 32..=2048"
    );
    assert_eq!(
        err(&[1, 3, 48, 31], n(31)),
        "symbol `W` (input `x`, axis 3) is 31, outside its declared range 32..=2048"
    );
    assert_eq!(
        err(&[1, 3, 47, 100], n(100)),
        "input `x`, axis 2: expected 48, got 47"
    );
    assert_eq!(
        err(&[2, 3, 48, 100], n(100)),
        "input `x`, axis 0: expected 1, got 2"
    );
    assert_eq!(
        err(&[3, 48, 100], n(100)),
        "input `x` has rank 4, got a shape of rank 3"
    );
    assert_eq!(
        err(&[1, 3, 48, 100], n(101)),
        "input `x` must hold 57600 bytes (14400 elements of float32), got 58176"
    );
    // A context sized for W=100 is too small for W=1000, and says so.
    let small: &[usize] = &[1, 3, 48, 100];
    let e = s
        .run_in(&[small], &[&x[..n(1000)]], &[&[1, 3, 48, 1000]])
        .expect_err("a run needing more arena than the context holds");
    assert!(
        matches!(e, kiln_runtime::Error::ArenaTooSmall { needed, got } if needed > got),
        "{e}"
    );
    // ...while W=64 fits in it.
    s.run_in(&[small], &[&x[..n(64)]], &[&[1, 3, 48, 64]])
        .expect("W=64 runs in an arena sized for W=100");
}

/// Inputs sharing a symbol must agree on it (MiniLM's three inputs are all
/// `[batch, sequence]`), and a symbol off its step is refused.
#[test]
fn inputs_agree_on_shared_symbols() {
    let c = case("minilm_sequence");
    let build = c.compiled.as_ref().unwrap_or_else(|e| panic!("{e}"));
    let mut s = (build.load)(build.weights).unwrap_or_else(|e| panic!("{e}"));
    let ids = vec![0u8; 8 * 2 * 16];
    let e = s
        .run(&[&ids, &ids, &ids], &[&[2, 16], &[2, 15], &[2, 16]])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert_eq!(
        e,
        "input `attention_mask`, axis 1: is 15, but `sequence` is 16 with the dims read so \
         far (`sequence` from input `input_ids`, axis 1)"
    );
}

/// Every case of dynamic.json has a test above.
#[test]
fn every_case_is_tested() {
    require_dynamic_data();
    let mut listed: Vec<&str> = real_models::DYNAMIC.iter().map(|c| c.name).collect();
    listed.sort_unstable();
    assert_eq!(
        listed,
        [
            "cls_batch",
            "det_height_width",
            "minilm_sequence",
            "orientation_batch",
            "rec_batch_width",
            "rec_width",
            "vad_sequence",
            "yolo_height_width",
            "yolo_nms_height_width"
        ]
    );
}
