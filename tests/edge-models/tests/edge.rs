//! Every edge case of `testdata/edge` compiled (by `build.rs`, all into this crate), run
//! through the byte interface on the seeded inputs `make_edge_models.py` saved, and
//! compared with onnxruntime's outputs on the same inputs. Prints a table: case,
//! compiled?, ran?, max |diff|.
//!
//! Tolerances: integer outputs exactly; float32 outputs within 1e-6 + 1e-5 · |ref|
//! (single elementwise operators, where another libm may differ in the last bits), and
//! `small_cnn` and `residual_adds` within 1e-5 + 1e-4 · |ref| (sums of up to 144
//! products in another order). A few tests below use the typed API (`Inputs`/`Outputs` field names).

use std::path::Path;

use kiln_compiler::npy;
use kiln_compiler::tensor::{DType, Tensor};
use kiln_edge_models::{CASES, Status, cases, require_testdata};

/// The case's `k`-th file `stem_k.npy`, for every k that exists.
fn npys(dir: &Path, stem: &str) -> Vec<Tensor> {
    (0..)
        .map(|k| dir.join(format!("{stem}_{k}.npy")))
        .take_while(|p| p.is_file())
        .map(|p| npy::read(&p).unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

fn tolerance(case: &str) -> (f64, f64) {
    if case == "small_cnn" || case == "residual_adds" {
        (1e-5, 1e-4)
    } else {
        (1e-6, 1e-5)
    }
}

/// Max |diff| of output bytes `got` against `want` and whether it is within tolerance.
fn compare(got: &[u8], want: &Tensor, (atol, rtol): (f64, f64)) -> Result<f64, String> {
    let want_bytes = want.data.bytes();
    if got.len() != want_bytes.len() {
        return Err(format!(
            "{} bytes, onnxruntime has {}",
            got.len(),
            want_bytes.len()
        ));
    }
    match want.dtype {
        DType::F32 => {
            let mut max = 0.0f64;
            for (i, (g, &w)) in got.chunks_exact(4).zip(want.as_f32().iter()).enumerate() {
                let g = f32::from_le_bytes([g[0], g[1], g[2], g[3]]) as f64;
                let d = (g - w as f64).abs();
                max = max.max(d);
                if d.is_nan() || d > atol + rtol * (w as f64).abs() {
                    return Err(format!("element {i}: {g} against {w}"));
                }
            }
            Ok(max)
        }
        _ if got == want_bytes => Ok(0.0),
        t => Err(format!("{t} values differ")),
    }
}

#[test]
fn every_edge_case_matches_onnxruntime() {
    require_testdata();
    assert!(
        CASES.len() >= 11,
        "expected every case of make_edge_models.py, found {}",
        CASES.len()
    );
    let mut failures = Vec::new();
    eprintln!("{:<20} {:<9} {:<6} max |diff|", "case", "compiles", "runs");
    for case in CASES {
        let dir = Path::new(case.dir);
        let row = match &case.status {
            Status::Rejected(e) => {
                failures.push(format!("{}: does not compile: {e}", case.name));
                ("no", "-", "-".to_owned())
            }
            Status::Compiled(run) => {
                let inputs = npys(dir, "input");
                let bytes: Vec<&[u8]> = inputs.iter().map(|t| t.data.bytes()).collect();
                match run(&bytes) {
                    Err(e) => {
                        failures.push(format!("{}: run failed: {e}", case.name));
                        ("yes", "no", "-".to_owned())
                    }
                    Ok(outs) => {
                        let want = npys(dir, "expected");
                        let mut max = 0.0f64;
                        let mut ok = outs.len() == want.len();
                        if !ok {
                            failures.push(format!(
                                "{}: {} outputs, onnxruntime has {}",
                                case.name,
                                outs.len(),
                                want.len()
                            ));
                        }
                        for (k, ((g, shape), w)) in outs.iter().zip(&want).enumerate() {
                            if *shape != w.shape {
                                ok = false;
                                failures.push(format!(
                                    "{}: output {k} has shape {shape:?}, onnxruntime's {:?}",
                                    case.name, w.shape
                                ));
                            }
                            match compare(g, w, tolerance(case.name)) {
                                Ok(m) => max = max.max(m),
                                Err(e) => {
                                    ok = false;
                                    failures.push(format!("{}: output {k}: {e}", case.name));
                                }
                            }
                        }
                        (
                            "yes",
                            "yes",
                            format!("{max:.2e}{}", if ok { "" } else { " FAIL" }),
                        )
                    }
                }
            }
        };
        eprintln!("{:<20} {:<9} {:<6} {}", case.name, row.0, row.1, row.2);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Outputs of onnxruntime for case `name`, as float32.
fn expected(name: &str) -> Vec<Vec<f32>> {
    let case = CASES
        .iter()
        .find(|c| c.name == name)
        .expect("case compiled");
    npys(Path::new(case.dir), "expected")
        .iter()
        .map(Tensor::as_f32)
        .collect()
}

fn inputs_f32(name: &str) -> Vec<Vec<f32>> {
    let case = CASES
        .iter()
        .find(|c| c.name == name)
        .expect("case compiled");
    npys(Path::new(case.dir), "input")
        .iter()
        .map(Tensor::as_f32)
        .collect()
}

/// Sanitised field names: keywords get `_`, a leading digit `t`, names that collide
/// are numbered, and a name with nothing ASCII left becomes `t`.
#[test]
fn names_become_fields() {
    require_testdata();
    use cases::names::{Context, Inputs, Model};
    let x = inputs_f32("names");
    let model = Model::new().unwrap();
    let mut ctx = Context::new();
    let out = model
        .run(
            &mut ctx,
            Inputs {
                type_: &x[0],
                self_: &x[1],
                t1x: &x[2],
                a_b_c_0: &x[3],
                t: &x[4],
                a_b: &x[5],
                a_b_2: &x[6],
            },
        )
        .unwrap();
    let want = expected("names");
    let got = [out.fn_, out.self_, out.t, out.n, out.a_b_c_0_out];
    for (g, w) in got.iter().zip(&want) {
        for (a, b) in g.iter().zip(w) {
            assert!((a - b).abs() <= 1e-6 + 1e-5 * b.abs(), "{a} against {b}");
        }
    }
    assert_eq!(cases::names::STEPS[1].0, "mul\nsecond line");
}

/// A model with no inputs takes `Inputs::default()`.
#[test]
fn no_inputs_takes_default() {
    require_testdata();
    use cases::no_inputs::{Context, Inputs, Model, N_INPUTS};
    assert_eq!(N_INPUTS, 0);
    let model = Model::new().unwrap();
    let mut ctx = Context::new();
    let out = model.run(&mut ctx, Inputs::default()).unwrap();
    assert_eq!(out.y, &expected("no_inputs")[0][..]);
}

/// An output that is also an input is a copy of it; the same value listed twice is two
/// equal fields.
#[test]
fn outputs_that_are_inputs_or_repeated() {
    require_testdata();
    let x = inputs_f32("output_is_input");
    let model = cases::output_is_input::Model::new().unwrap();
    let mut ctx = cases::output_is_input::Context::new();
    let out = model
        .run(&mut ctx, cases::output_is_input::Inputs { x: &x[0] })
        .unwrap();
    assert_eq!(out.x, &x[0][..]);

    let x = inputs_f32("duplicate_output");
    let model = cases::duplicate_output::Model::new().unwrap();
    let mut ctx = cases::duplicate_output::Context::new();
    let out = model
        .run(&mut ctx, cases::duplicate_output::Inputs { x: &x[0] })
        .unwrap();
    assert_eq!(out.y, out.y_2);
    assert_eq!(out.y.len(), 4);
}

/// Rank 0 is one element; a zero-sized input is an empty slice, and a wrong length is
/// an `Err`, not a panic.
#[test]
fn rank0_and_empty_tensors() {
    require_testdata();
    use cases::{rank0, zero_dim};
    assert_eq!(rank0::INPUTS[0].shape, &[] as &[usize]);
    let model = rank0::Model::new().unwrap();
    let mut ctx = rank0::Context::new();
    let x = inputs_f32("rank0");
    let out = model
        .run(&mut ctx, rank0::Inputs { s: &x[0], x: &x[1] })
        .unwrap();
    assert_eq!((out.p.len(), out.total.len()), (1, 1));
    assert!(
        model
            .run(&mut ctx, rank0::Inputs { s: &[], x: &x[1] })
            .is_err()
    );

    let model = zero_dim::Model::new().unwrap();
    let mut ctx = zero_dim::Context::new();
    let x = inputs_f32("zero_dim");
    assert!(x[0].is_empty());
    let out = model
        .run(&mut ctx, zero_dim::Inputs { e: &[], x: &x[1] })
        .unwrap();
    assert!(out.empty.is_empty());
    assert_eq!(out.y.len(), 6);
    assert!(
        model
            .run(
                &mut ctx,
                zero_dim::Inputs {
                    e: &[1.0],
                    x: &x[1]
                }
            )
            .is_err()
    );
}

/// 2,000 outputs, each its own field; the byte interface checks the input count.
#[test]
fn two_thousand_outputs() {
    require_testdata();
    use cases::many_outputs::{Context, Inputs, Model, N_OUTPUTS};
    assert_eq!(N_OUTPUTS, 2000);
    let x = inputs_f32("many_outputs");
    let model = Model::new().unwrap();
    let mut ctx = Context::new();
    let out = model.run(&mut ctx, Inputs { x: &x[0] }).unwrap();
    let want = expected("many_outputs");
    for (a, b) in out.out_1999.iter().zip(&want[1999]) {
        assert!((a - b).abs() <= 1e-6 + 1e-5 * b.abs(), "{a} against {b}");
    }
    assert!(model.run_bytes(&mut ctx, &[]).is_err());
}

/// TopK's k read at run time through the typed API: every k in 0..=20 gives `[4, k]`
/// outputs (the output shape from the context), the values for k ≤ 7 are the prefix of
/// each row of onnxruntime's k = 7 result (TopK sorts), and k past the axis is an error
/// naming it, not a panic.
#[test]
fn topk_reads_k_at_run_time() {
    use cases::topk_runtime_k::{Context, Dims, Inputs, Model};
    require_testdata();
    let case = CASES
        .iter()
        .find(|c| c.name == "topk_runtime_k")
        .expect("case");
    let x = npys(Path::new(case.dir), "input")[0].as_f32();
    let want = &expected("topk_runtime_k")[0];
    let model = Model::new().unwrap();
    let mut ctx = Context::new();
    for k in 0..=20usize {
        let out = model
            .run(
                &mut ctx,
                Dims {},
                Inputs {
                    x: &x,
                    k: &[k as i64],
                },
            )
            .unwrap();
        assert_eq!(out.v2.len(), 4 * k, "k = {k}");
        if k <= 7 {
            for row in 0..4 {
                assert_eq!(
                    out.v2[row * k..][..k],
                    want[row * 7..][..k],
                    "k = {k}, row {row}"
                );
            }
        }
        assert_eq!(ctx.output_shape(0), Some(vec![4, k]));
        assert_eq!(ctx.output_shape(1), Some(vec![4, k]));
    }
    for k in [21, -1] {
        let err = model
            .run(&mut ctx, Dims {}, Inputs { x: &x, k: &[k] })
            .map(|_| ())
            .unwrap_err();
        assert!(
            matches!(err, kiln_runtime::Error::ExtentOutOfRange { value, max: 20, .. } if value == k),
            "{err}"
        );
        assert_eq!(ctx.output_shape(0), None, "a failed run reports no shapes");
    }
}
