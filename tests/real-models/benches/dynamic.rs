//! Latency of the builds over declared ranges (`dynamic.json`) at each of their points,
//! next to onnxruntime on the same inputs in the same run, and at the static build's
//! shape next to the static build (and, for a case built with `--opt` there, the
//! constant-shape path): the cost of dims read at run time. Single-threaded; prints a
//! markdown table; asserts nothing.
//!
//! `cargo bench -p kiln-real-models --bench dynamic` (needs the data of
//! `scripts/make_dynamic_refs.py` and .venv). `KILN_BENCH_RUNS` sets the timed runs
//! (default 20, after one warm-up; onnxruntime's in `scripts/ort_bench.py`).

use kiln_real_models::{
    find, module_inputs, ort_median_ms, read_data, real_models, require_dynamic_data,
};

/// One line of the table: a shape's inputs, and their files for onnxruntime.
struct Row {
    label: String,
    inputs: Vec<kiln_compiler::tensor::Tensor>,
    files: Vec<(String, String)>,
    /// The static build's shape (timed with the static build too).
    is_static: bool,
}

fn main() {
    require_dynamic_data();
    let runs: usize = std::env::var("KILN_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    println!(
        "| case | point | dynamic ms | --opt ms | static ms | ort ms | dynamic/static | --opt/static | dynamic/ort | arena / max |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for case in real_models::DYNAMIC {
        let Ok(build) = &case.compiled else {
            println!("| {} | does not compile | | | | | | | | |", case.name);
            continue;
        };
        if !real_models::MODELS.iter().any(|m| m.name == case.model) {
            // A model make_dynamic_refs.py made (YOLO with NMS appended): no static
            // build, no onnxruntime row here; its test checks it against onnxruntime.
            println!(
                "| {} | no static build of {} | | | | | | | | |",
                case.name, case.model
            );
            continue;
        }
        let mut session = (build.load)(build.weights).expect("loading the dynamic build");
        let mut opt = case
            .opt
            .as_ref()
            .map(|o| (o.load)(o.weights).expect("loading the --opt build"));
        let (m, s) = find(case.model);
        // The static build's own shape first, then the points.
        let static_inputs = module_inputs(m, s).expect("the static build's inputs");
        let mut rows = vec![Row {
            label: "static shape".into(),
            inputs: static_inputs,
            files: m
                .inputs
                .iter()
                .map(|io| (io.name.to_owned(), io.file.to_owned()))
                .collect(),
            is_static: true,
        }];
        for p in case.points {
            let inputs = p
                .inputs
                .iter()
                .map(|f| read_data(f).expect("point input"))
                .collect();
            let names = build
                .inputs
                .iter()
                .zip(p.inputs)
                .map(|(i, f)| (i.name.to_owned(), (*f).to_owned()))
                .collect();
            rows.push(Row {
                label: format!("{:?}", p.values),
                inputs,
                files: names,
                is_static: false,
            });
        }
        let mut fixed = (s.load)(s.weights).expect("loading the static build");
        for Row {
            label,
            inputs,
            files,
            is_static,
        } in rows
        {
            let bytes: Vec<&[u8]> = inputs.iter().map(|t| t.data.bytes()).collect();
            let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape.as_slice()).collect();
            let dynamic = session
                .median_ms(&bytes, &shapes, runs)
                .expect("dynamic run");
            let arena = session
                .run(&bytes, &shapes)
                .expect("dynamic run")
                .arena_bytes;
            // The --opt build is made at the static build's shape.
            let opt_ms = opt.as_mut().filter(|_| is_static).map(|o| {
                o.median_ms(&bytes, &shapes, runs)
                    .expect("--opt run at its dims")
            });
            let fixed_ms = is_static.then(|| {
                fixed.run_only(&bytes).expect("static run");
                let mut t: Vec<f64> = (0..runs)
                    .map(|_| {
                        let start = std::time::Instant::now();
                        fixed.run_only(&bytes).expect("static run");
                        start.elapsed().as_secs_f64() * 1e3
                    })
                    .collect();
                t.sort_by(f64::total_cmp);
                t[t.len() / 2]
            });
            let files: Vec<(&str, &str)> = files
                .iter()
                .map(|(n, f)| (n.as_str(), f.as_str()))
                .collect();
            let ort = ort_median_ms(m.onnx, &files, runs);
            let cell = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.3}"));
            println!(
                "| {} | {label} | {dynamic:.3} | {} | {} | {} | {} | {} | {} | {:.3} |",
                case.name,
                cell(opt_ms),
                cell(fixed_ms),
                ort.as_ref()
                    .map_or_else(|e| format!("({e})"), |v| format!("{v:.3}")),
                cell(fixed_ms.map(|f| dynamic / f)),
                cell(opt_ms.zip(fixed_ms).map(|(o, f)| o / f)),
                ort.as_ref()
                    .map_or_else(|_| String::new(), |o| format!("{:.2}", dynamic / o)),
                arena as f64 / build.arena_bytes_max as f64,
            );
        }
    }
}
