//! Runs every node test case Kiln compiled on its inputs, compares with ONNX's expected
//! outputs, prints a table per operator, and checks the outcome against
//! `expectations.txt` (every case that does not pass, with why). The list may only
//! shrink: a case that newly fails, and a listed case that now passes, both fail the
//! test. `KILN_UPDATE_EXPECTATIONS=1` rewrites the file instead.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use kiln_conformance::{
    CASES, Case, NODE_DIR, Outcome, Status, Tolerance, compare, diff_expectations, read_npy,
    report, require_testdata,
};

/// Every float output: `|got - expected| <= atol + rtol * |expected|`.
const DEFAULT: Tolerance = Tolerance {
    rtol: 1e-3,
    atol: 1e-5,
};

/// Per-operator exceptions to [`DEFAULT`], each with its reason. The only place a
/// tolerance may be loosened.
const TOLERANCES: &[(&str, Tolerance, &str)] = &[];

/// Cases whose expected output's shape contradicts the model itself; their values are
/// compared (the element count must still match), their shapes are not. The only place
/// a shape check may be waived.
/// (A rank-0 result stored as shape [1] is accepted by `compare` for every case.)
const SHAPE_EXCEPTIONS: &[(&str, &str)] = &[];

fn tolerance(operator: &str) -> Tolerance {
    TOLERANCES
        .iter()
        .find(|(op, _, _)| *op == operator)
        .map_or(DEFAULT, |&(_, t, _)| t)
}

/// Runs one compiled case and compares every output.
fn run_case(case: &Case, run: kiln_conformance::RunFn) -> Outcome {
    let dir = Path::new(NODE_DIR).join(case.name);
    let mut inputs = Vec::new();
    for j in 0..case.inputs {
        match read_npy(&dir.join(format!("input_{j}.npy"))) {
            Ok(t) => inputs.push(t),
            Err(e) => return Outcome::Failed(format!("reading input {j}: {e}")),
        }
    }
    let args: Vec<&[u8]> = inputs.iter().map(|t| t.bytes()).collect();
    let outs = match catch_unwind(AssertUnwindSafe(|| run(&args))) {
        Ok(Ok(outs)) => outs,
        Ok(Err(e)) => return Outcome::Failed(format!("run error: {e}")),
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".into());
            return Outcome::Failed(format!("panicked: {msg}"));
        }
    };
    for (j, (got, kiln_shape)) in outs.iter().enumerate() {
        let want = match read_npy(&dir.join(format!("output_{j}.npy"))) {
            Ok(t) => t,
            Err(e) => return Outcome::Failed(format!("reading output {j}: {e}")),
        };
        let onnx_type = case.outputs.get(j).copied().unwrap_or("?");
        let shape = if SHAPE_EXCEPTIONS.iter().any(|(c, _)| *c == case.name)
            && kiln_shape.iter().product::<usize>() == want.shape.iter().product::<usize>()
        {
            want.shape.as_slice()
        } else {
            kiln_shape.as_slice()
        };
        if let Err(e) = compare(got, shape, &want, onnx_type, tolerance(case.operator)) {
            return Outcome::Failed(format!("output {j}: {e}"));
        }
    }
    Outcome::Passed
}

#[test]
fn node_tests_match_expectations() {
    require_testdata();
    // Panics are caught per case and reported as failures; keep the default hook's
    // backtrace noise out of the table.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let results: Vec<(&Case, Outcome)> = CASES
        .iter()
        .map(|case| {
            let outcome = match &case.status {
                Status::Excluded(r) => Outcome::Excluded(r.to_string()),
                Status::Unsupported(r) => Outcome::Unsupported(r.to_string()),
                Status::Compiled { run } => run_case(case, *run),
            };
            (case, outcome)
        })
        .collect();
    std::panic::set_hook(hook);

    print!("{}", report(&results));
    let panicked: Vec<&str> = results
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Failed(r) if r.starts_with("panicked:")))
        .map(|(c, _)| c.name)
        .collect();
    if !panicked.is_empty() {
        println!("cases that panicked: {}", panicked.join(", "));
    }

    let mut now: Vec<String> = results.iter().filter_map(|(c, o)| o.line(c.name)).collect();
    now.sort();
    if !env!("KILN_NODE_FILTER").is_empty() {
        println!(
            "KILN_NODE_FILTER={}: expectations not checked; not passing:",
            env!("KILN_NODE_FILTER")
        );
        for line in &now {
            println!("  {line}");
        }
        return;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("expectations.txt");
    if std::env::var_os("KILN_UPDATE_EXPECTATIONS").is_some_and(|v| v == "1") {
        let text: String = now.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&path, text).expect("writing expectations.txt");
        println!("wrote {} lines to {}", now.len(), path.display());
        return;
    }
    let file: Vec<String> = std::fs::read_to_string(&path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect();
    let (remove, add) = diff_expectations(&file, &now);
    let stale = now.iter().filter(|l| !file.contains(l)).count() - add.len();
    if stale > 0 {
        println!(
            "note: {stale} listed reasons differ from today's (not a failure; \
             KILN_UPDATE_EXPECTATIONS=1 refreshes them)"
        );
    }
    if remove.is_empty() && add.is_empty() {
        return;
    }
    let mut msg = format!("{} differs from today's outcomes.\n", path.display());
    if !remove.is_empty() {
        msg.push_str("Remove these lines (the case now passes, or its status changed):\n");
        for l in &remove {
            msg.push_str(&format!("- {l}\n"));
        }
    }
    if !add.is_empty() {
        msg.push_str("Add these lines (the case does not pass, or its status changed):\n");
        for l in &add {
            msg.push_str(&format!("+ {l}\n"));
        }
    }
    msg.push_str("KILN_UPDATE_EXPECTATIONS=1 rewrites the file.");
    panic!("{msg}");
}
