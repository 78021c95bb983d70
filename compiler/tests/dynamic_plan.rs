//! Dynamic shapes, planning (`kiln_compiler::dynamic::plan_over_ranges`): the real
//! models planned once over declared ranges. At each point tried, the plan is checked
//! by the static validator, every buffer gets at least the bytes a build fixed at that
//! point gives the same tensor (exactly those, unless held at its largest size; a
//! kernel's scratch at least its least need, as the kernel checks; not the scratch of
//! a layer the fixed build alone runs as Winograd), and
//! the arena is at most `ARENA_BYTES_MAX`, itself no larger than the static plan at the
//! largest point.

use std::collections::HashMap;
use std::path::PathBuf;

use kiln_compiler::dim::Dim;
use kiln_compiler::dynamic::plan_over_ranges;
use kiln_compiler::lower::Kernel;
use kiln_compiler::{Options, compile_bytes, parse_dim_spec, parse_input_spec};

fn real_models() -> PathBuf {
    let dir = std::env::var_os("KILN_TESTDATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata"))
        .join("real_models");
    assert!(
        dir.join("models.json").exists(),
        "no real models in {}: run `.venv/bin/python scripts/fetch_real_models.py` (see .ci/run)",
        dir.display()
    );
    dir
}

fn options(inputs: &[&str], dims: &[&str]) -> Options {
    Options {
        input_dims: inputs
            .iter()
            .map(|s| parse_input_spec(s).expect("input spec"))
            .collect(),
        symbol_ranges: dims
            .iter()
            .map(|s| parse_dim_spec(s).expect("dim spec"))
            .collect(),
        ..Options::default()
    }
}

/// Plans `model` over the ranges and checks it at `points` against builds fixed there.
/// Returns `arena at the point / ARENA_BYTES_MAX` per point.
fn check(model: &str, inputs: &[&str], dims: &[&str], points: &[&[(&str, i64)]]) -> Vec<f64> {
    let bytes = std::fs::read(real_models().join(format!("{model}.onnx"))).expect("read model");
    let opts = options(inputs, dims);
    let rp = plan_over_ranges(&bytes, model, &opts).expect("plan over the ranges");
    let max = rp.plan.arena_bytes_max;
    assert!(
        max <= rp.at_max.plan.arena_bytes,
        "{model}: max above the static plan"
    );
    let symbolic = kiln_compiler::infer_shapes(&bytes, &opts).expect("infer");
    let mut ratios = Vec::new();
    for point in points {
        let evaluated = rp.at(point).expect("a point of the ranges");
        assert!(evaluated.arena_bytes <= max, "{model} at {point:?}");
        // The static validator on the plan at this point.
        let bind = kiln_compiler::dim::bind(&rp.ranges, point);
        let (pi, mp) = rp.plan.at(&rp.input, &bind).expect("plan at the point");
        kiln_compiler::plan::validate(&pi, &mp)
            .unwrap_or_else(|e| panic!("{model} at {point:?}: {e}"));
        // A build fixed at the point: the same tensors need no more than planned.
        let mut fixed = Options::default();
        for i in &symbolic.inputs {
            let v = symbolic.value(i.value);
            let d: Vec<Dim> = v
                .dims()
                .iter()
                .map(|d| Dim::from(d.eval(&bind).expect("bound") as usize))
                .collect();
            fixed.input_dims.push((v.name.clone(), d));
        }
        let c = compile_bytes(&bytes, model, "m", &fixed).expect("fixed build");
        // A kernel that takes more scratch where it is lent more needs only its least.
        let least: HashMap<&str, usize> = c
            .program
            .steps
            .iter()
            .filter_map(|s| Some((s.scratch?, s.kernel.least_scratch_len()?)))
            .map(|(b, len)| (c.program.buffers[b.index()].name.as_str(), len * 4))
            .collect();
        // A layer the fixed build runs as Winograd by its shape alone runs as another
        // kernel over the ranges, with a scratch of its own size.
        let other_kernel: Vec<&str> = c
            .program
            .steps
            .iter()
            .filter(|s| matches!(s.kernel, Kernel::Winograd(p, _) if !p.winograd_applies()))
            .filter_map(|s| Some(c.program.buffers[s.scratch?.index()].name.as_str()))
            .collect();
        let wanted: HashMap<&str, usize> = c
            .plan_input
            .buffers
            .iter()
            .filter(|b| !other_kernel.contains(&b.name.as_str()))
            .map(|b| {
                (
                    b.name.as_str(),
                    least
                        .get(b.name.as_str())
                        .map_or(b.size, |&l| l.min(b.size)),
                )
            })
            .collect();
        let mut compared = 0;
        for (i, b) in rp.input.input.buffers.iter().enumerate() {
            let Some(&want) = wanted.get(b.name.as_str()) else {
                continue;
            };
            let got = evaluated.aligned_sizes[i];
            assert!(
                got >= want,
                "{model} at {point:?}: `{}` planned {got} B, the fixed build needs {want} B",
                b.name
            );
            if !rp.plan.buffers[i].is_reserved() && rp.plan.buffers[i].size.known().is_none() {
                assert!(
                    got < want + pi.alignment,
                    "{model} at {point:?}: `{}` {got} vs {want}",
                    b.name
                );
            }
            compared += 1;
        }
        assert!(
            compared * 2 > wanted.len(),
            "{model}: only {compared} buffers matched by name"
        );
        ratios.push(evaluated.arena_bytes as f64 / max as f64);
        eprintln!(
            "{model} at {point:?}: arena {} B = {:.3} of the max {} B; the static plan there {} B",
            evaluated.arena_bytes,
            evaluated.arena_bytes as f64 / max as f64,
            max,
            c.plan.arena_bytes
        );
    }
    ratios
}

#[test]
fn text_recognizer_over_widths() {
    let r = check(
        "ppocr_rec_v4",
        &["x=1x3x48xW"],
        &["W=32..2048"],
        &[
            &[("W", 32)],
            &[("W", 100)],
            &[("W", 320)],
            &[("W", 1000)],
            &[("W", 2048)],
        ],
    );
    assert!(r.windows(2).all(|w| w[0] <= w[1]), "{r:?}");
    assert_eq!(r[4], 1.0);
    assert!(r[2] < 0.25, "{r:?}");
}

#[test]
fn detector_over_heights_and_widths() {
    let r = check(
        "ppocr_det_v4",
        &["x=1x3xHxW"],
        &["H=32..1024:32", "W=32..1024:32"],
        &[
            &[("H", 64), ("W", 96)],
            &[("H", 320), ("W", 640)],
            &[("H", 1024), ("W", 1024)],
        ],
    );
    assert!(r[0] < r[1] && r[1] < r[2], "{r:?}");
}

#[test]
fn encoder_over_batch_and_sequence() {
    let r = check(
        "minilm_l6_int8",
        &[],
        &["batch=1..4", "sequence=1..512"],
        &[
            &[("batch", 1), ("sequence", 1)],
            &[("batch", 1), ("sequence", 7)],
            &[("batch", 1), ("sequence", 64)],
            &[("batch", 2), ("sequence", 128)],
            &[("batch", 1), ("sequence", 511)],
            &[("batch", 4), ("sequence", 512)],
        ],
    );
    assert_eq!(r[5], 1.0);
    assert!(r[2] < 0.05, "{r:?}");
}

#[test]
fn a_point_outside_the_ranges_is_an_error() {
    let bytes = std::fs::read(real_models().join("ppocr_rec_v4.onnx")).expect("read model");
    let opts = options(&["x=1x3x48xW"], &["W=32..2048:8"]);
    let rp = plan_over_ranges(&bytes, "rec", &opts).expect("plan");
    for (point, message) in [
        (
            &[("W", 16)][..],
            "invalid option: --at: W=16 is not a value of --dim W=32..2048:8",
        ),
        (
            &[("W", 36)][..],
            "invalid option: --at: W=36 is not a value of --dim W=32..2048:8",
        ),
        (&[][..], "invalid option: --at: no value for `W`"),
    ] {
        assert_eq!(rp.at(point).unwrap_err().to_string(), message);
    }
    // A symbol the inputs use without a range.
    let opts = options(&["x=1x3x48xW"], &[]);
    let e = plan_over_ranges(&bytes, "rec", &opts)
        .err()
        .expect("no range for W");
    assert!(
        e.to_string().contains("uses a symbol without a range"),
        "{e}"
    );
}
