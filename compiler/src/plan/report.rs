//! Pass 5: reports of a plan, for people (`text_report`, in the spirit of seed
//! 000's printed report) and for tools (`json_report`).
//!
//! Both print the arena beside the naive total and the liveness lower bound: the
//! bound says how much of the gap to naive is the planner's doing and how much
//! is left to win only by aliasing or rescheduling. The bound is the one without
//! in-place aliasing, the reference arenas are measured against; with aliases the
//! arena may fall below it, and the bound with them is printed beside it. Neither
//! trusts `plan` to match `input`: a missing entry prints as `?` (text) or `null`
//! (JSON).

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::{BufferId, MemoryPlan, PlanInput};

/// A table of buffers (name, size, offset, end, live steps, kind, writer), then
/// the totals: naive bytes, lower bound, the bound with in-place aliases (when there
/// are any), arena, saving vs naive and vs the bound, arena / lower bound, and every
/// strategy's arena, with and without in-place aliases.
pub fn text_report(input: &PlanInput, plan: &MemoryPlan) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Memory plan: {} buffers over {} steps, alignment {} B",
        input.buffers.len(),
        input.steps,
        plan.alignment
    );
    out.push('\n');

    let mut table = Table::new(&[
        ("#", Align::Right),
        ("name", Align::Left),
        ("size", Align::Right),
        ("offset", Align::Right),
        ("end", Align::Right),
        ("live", Align::Left),
        ("kind", Align::Left),
        ("written by", Align::Left),
    ]);
    for (i, buffer) in input.buffers.iter().enumerate() {
        let offset = plan.offsets.get(i).copied();
        let end = offset
            .zip(plan.aligned_sizes.get(i).copied())
            .and_then(|(o, s)| o.checked_add(s));
        let live = plan
            .lifetimes
            .get(i)
            .map_or_else(|| "?".to_string(), |l| format!("{}..{}", l.first, l.last));
        let name_of = |x: BufferId| input.buffers.get(x.index()).map_or("?", |b| &b.name);
        let id = BufferId(i as u32);
        let mut kinds: Vec<String> = Vec::new();
        if buffer.scratch {
            kinds.push("scratch".into());
        } else if buffer.live_to_end {
            kinds.push("output".into());
        }
        if let Some((x, delta)) = plan.slice(id) {
            kinds.push(format!("slice of {} at +{delta}", name_of(x)));
        }
        if let Some(x) = plan.alias(id) {
            kinds.push(format!("in place of {}", name_of(x)));
        }
        if let Some((x, delta)) = plan.overlap(id) {
            kinds.push(format!("overlaps {} at {delta}", name_of(x)));
        }
        let kind = kinds.join(", ");
        table.row(vec![
            i.to_string(),
            buffer.name.clone(),
            buffer.size.to_string(),
            opt(offset),
            opt(end),
            live,
            kind,
            input.step_name(buffer.def),
        ]);
    }
    out.push_str(&table.render());
    out.push('\n');

    let bytes = |b: usize| match b {
        0..1024 => format!("{b} B"),
        _ => format!("{b} B ({})", human(b)),
    };
    let peak = match plan.peak_step {
        Some(step) => format!(", at step {step} `{}`", input.step_name(step)),
        None => String::new(),
    };
    let mut totals = Table::new(&[("", Align::Left), ("", Align::Left)]);
    totals.row(vec!["naive (no reuse)".into(), bytes(plan.naive_bytes)]);
    totals.row(vec![
        "lower bound".into(),
        format!("{}{peak}", bytes(plan.lower_bound_bytes)),
    ]);
    let aliased = plan
        .strategies
        .iter()
        .any(|t| t.in_place || t.slices || t.overlaps);
    if aliased {
        totals.row(vec![
            "lower bound in place".into(),
            bytes(plan.in_place_lower_bound_bytes),
        ]);
    }
    let in_place = match plan.in_place_count() {
        0 => String::new(),
        1 => ", 1 buffer in place".into(),
        n => format!(", {n} buffers in place"),
    };
    let in_place = match plan.slice_count() {
        0 => in_place,
        1 => format!("{in_place}, 1 Concat input in place"),
        n => format!("{in_place}, {n} Concat inputs in place"),
    };
    let in_place = match plan.overlap_count() {
        0 => in_place,
        1 => format!("{in_place}, 1 output overlapping its input"),
        n => format!("{in_place}, {n} outputs overlapping their input"),
    };
    totals.row(vec![
        "arena".into(),
        format!(
            "{}, by {}{in_place}",
            bytes(plan.arena_bytes),
            plan.strategy
        ),
    ]);
    let percent =
        |r: Option<f64>| r.map_or_else(|| "n/a".into(), |r| format!("{:.2} %", 100.0 * r));
    let saving =
        |reference: usize| percent(ratio(reference as f64 - plan.arena_bytes as f64, reference));
    totals.row(vec!["saving vs naive".into(), saving(plan.naive_bytes)]);
    if aliased {
        totals.row(vec![
            "saving vs lower bound".into(),
            saving(plan.lower_bound_bytes),
        ]);
    }
    totals.row(vec![
        "arena / lower bound".into(),
        ratio(plan.arena_bytes as f64, plan.lower_bound_bytes)
            .map_or_else(|| "n/a".into(), |r| format!("{r:.3}")),
    ]);
    out.push_str(&totals.render_headless());

    out.push_str(&strategies_table(plan));
    out
}

/// Every strategy's arena: one column, or one per set of aliases tried (in place,
/// overlaps, Concat slices, down to none) when the plan had candidates.
fn strategies_table(plan: &MemoryPlan) -> String {
    // The sets tried, in order: (in place, slices, overlaps).
    let mut columns: Vec<(bool, bool, bool)> = Vec::new();
    for t in &plan.strategies {
        let set = (t.in_place, t.slices, t.overlaps);
        if !columns.contains(&set) {
            columns.push(set);
        }
    }
    let label = |(in_place, slices, overlaps): (bool, bool, bool)| {
        let parts: Vec<&str> = [
            (in_place, "in place"),
            (overlaps, "overlaps"),
            (slices, "slices"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect();
        if parts.is_empty() {
            "without aliases".to_string()
        } else {
            parts.join(" + ")
        }
    };
    let aliased = columns.iter().any(|&c| c != (false, false, false));
    let labels: Vec<String> = columns
        .iter()
        .map(|&c| if aliased { label(c) } else { String::new() })
        .collect();
    let mut headers = vec![("", Align::Left)];
    headers.extend(labels.iter().map(|l| (l.as_str(), Align::Right)));
    headers.push(("", Align::Left));
    let mut table = Table::new(&headers);
    let mut names: Vec<&str> = Vec::new();
    for t in &plan.strategies {
        if !names.contains(&t.strategy) {
            names.push(t.strategy);
        }
    }
    let chosen = if aliased {
        let set = (
            plan.in_place_count() > 0,
            plan.slice_count() > 0,
            plan.overlap_count() > 0,
        );
        format!("<- chosen, {}", label(set))
    } else {
        "<- chosen".to_string()
    };
    for name in names {
        let arena = |set: (bool, bool, bool)| {
            let t = plan
                .strategies
                .iter()
                .find(|t| t.strategy == name && (t.in_place, t.slices, t.overlaps) == set);
            match t.map(|t| t.arena_bytes) {
                None => "-".to_string(),
                Some(a) if a < 1024 => format!("{a} B"),
                Some(a) => format!("{a} B ({})", human(a)),
            }
        };
        let mut row = vec![name.to_string()];
        row.extend(columns.iter().map(|&c| arena(c)));
        row.push(if name == plan.strategy {
            chosen.clone()
        } else {
            String::new()
        });
        table.row(row);
    }
    let table = if aliased {
        table.render()
    } else {
        table.render_headless()
    };
    format!("\nStrategies:\n{table}")
}

/// The plan as JSON: `alignment`, `steps`, `arena_bytes`, `naive_bytes`,
/// `lower_bound_bytes` (without aliasing), `in_place_lower_bound_bytes`, `peak_step`,
/// `strategy`, `strategies: [{name, in_place, slices, arena_bytes}]` and `tensors:
/// [{name, offset, size, aligned_size, first, last}]`, with `"scratch": true` on scratch
/// tensors, `"output": true` on live-to-end ones, `"alias_of": NAME` on tensors
/// written in place over the tensor NAME, and `"alias_of": NAME, "alias_delta": BYTES`
/// on tensors placed at byte BYTES of the Concat output NAME (slices), `"overlap_of":
/// NAME, "overlap_delta": BYTES` on outputs placed BYTES (negative) from the input NAME
/// they overlap; then `views: [{name, alias_of}]`, values that share a tensor's bytes
/// without a step (reshapes).
pub fn json_report(input: &PlanInput, plan: &MemoryPlan) -> Value {
    let tensors: Vec<Value> = input
        .buffers
        .iter()
        .enumerate()
        .map(|(i, buffer)| {
            let life = plan.lifetimes.get(i);
            let mut tensor = json!({
                "name": buffer.name,
                "offset": plan.offsets.get(i),
                "size": buffer.size,
                "aligned_size": plan.aligned_sizes.get(i),
                "first": life.map(|l| l.first),
                "last": life.map(|l| l.last),
            });
            if buffer.scratch {
                tensor["scratch"] = Value::Bool(true);
            }
            if buffer.live_to_end {
                tensor["output"] = Value::Bool(true);
            }
            if let Some(x) = plan.alias_of.get(i).copied().flatten() {
                let name = input.buffers.get(x.index()).map(|b| b.name.clone());
                tensor["alias_of"] = json!(name);
            }
            if let Some((x, delta)) = plan.slice_of.get(i).copied().flatten() {
                let name = input.buffers.get(x.index()).map(|b| b.name.clone());
                tensor["alias_of"] = json!(name);
                tensor["alias_delta"] = json!(delta);
            }
            if let Some((x, delta)) = plan.overlap_of.get(i).copied().flatten() {
                let name = input.buffers.get(x.index()).map(|b| b.name.clone());
                tensor["overlap_of"] = json!(name);
                tensor["overlap_delta"] = json!(delta);
            }
            tensor
        })
        .collect();
    let strategies: Vec<Value> = plan
        .strategies
        .iter()
        .map(
            |t| json!({ "name": t.strategy, "in_place": t.in_place, "slices": t.slices, "overlaps": t.overlaps, "arena_bytes": t.arena_bytes }),
        )
        .collect();
    let views: Vec<Value> = input
        .views
        .iter()
        .map(|(name, b)| {
            let of = input.buffers.get(b.index()).map(|b| b.name.clone());
            json!({ "name": name, "alias_of": of })
        })
        .collect();
    json!({
        "alignment": plan.alignment,
        "steps": input.steps,
        "arena_bytes": plan.arena_bytes,
        "naive_bytes": plan.naive_bytes,
        "lower_bound_bytes": plan.lower_bound_bytes,
        "in_place_lower_bound_bytes": plan.in_place_lower_bound_bytes,
        "peak_step": plan.peak_step,
        "strategy": plan.strategy,
        "strategies": strategies,
        "tensors": tensors,
        "views": views,
    })
}

fn opt(value: Option<usize>) -> String {
    value.map_or_else(|| "?".into(), |v| v.to_string())
}

/// `num / den`, or None when `den` is 0.
fn ratio(num: f64, den: usize) -> Option<f64> {
    (den > 0).then(|| num / den as f64)
}

/// Bytes in binary units with two decimals: `230.00 KiB`.
pub fn human(bytes: usize) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2} {}", UNITS[unit])
}

#[derive(Clone, Copy)]
enum Align {
    Left,
    Right,
}

/// A plain-text table with columns padded to their widest cell.
struct Table {
    headers: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(headers: &[(&str, Align)]) -> Self {
        Self {
            headers: headers.iter().map(|&(h, a)| (h.to_owned(), a)).collect(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn widths(&self, with_header: bool) -> Vec<usize> {
        self.headers
            .iter()
            .enumerate()
            .map(|(c, (h, _))| {
                let cells = self.rows.iter().filter_map(|r| r.get(c));
                let widest = cells.map(|s| s.chars().count()).max().unwrap_or(0);
                if with_header {
                    widest.max(h.chars().count())
                } else {
                    widest
                }
            })
            .collect()
    }

    fn line(&self, cells: &[String], widths: &[usize], out: &mut String) {
        let mut line = String::from("  ");
        for (c, ((_, align), &width)) in self.headers.iter().zip(widths).enumerate() {
            let cell = cells.get(c).map_or("", String::as_str);
            if c > 0 {
                line.push_str("  ");
            }
            let _ = match align {
                Align::Left => write!(line, "{cell:<width$}"),
                Align::Right => write!(line, "{cell:>width$}"),
            };
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }

    fn render(&self) -> String {
        let widths = self.widths(true);
        let mut out = String::new();
        let header: Vec<String> = self.headers.iter().map(|(h, _)| h.to_string()).collect();
        self.line(&header, &widths, &mut out);
        for row in &self.rows {
            self.line(row, &widths, &mut out);
        }
        out
    }

    fn render_headless(&self) -> String {
        let widths = self.widths(false);
        let mut out = String::new();
        for row in &self.rows {
            self.line(row, &widths, &mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::seed_003_example;
    use super::super::{BufferId, BufferRequest, PlanInput, plan};
    use super::*;

    #[test]
    fn text_report_of_seed_003() {
        let mut input = seed_003_example();
        input.push(BufferRequest::scratch("im2col", 1000, 4));
        let plan = plan(&input).unwrap();
        let text = text_report(&input, &plan);
        let expected = "\
Memory plan: 5 buffers over 15 steps, alignment 256 B

  #  name      size  offset     end  live    kind     written by
  0  T1      102400       0  102400  0..9             op0
  1  T2       51200  184320  235520  2..11            op2
  2  T3       81920  102400  184320  3..7             op3
  3  T4      102400       0  102400  10..14  output   op10
  4  im2col    1000  235520  236544  4..4    scratch  op4

  naive (no reuse)     338944 B (331.00 KiB)
  lower bound          236544 B (231.00 KiB), at step 4 `op4`
  arena                236544 B (231.00 KiB), by greedy-by-size
  saving vs naive      30.21 %
  arena / lower bound  1.000

Strategies:
  greedy-by-size     236544 B (231.00 KiB)  <- chosen
  greedy-by-breadth  236544 B (231.00 KiB)
  pools              236544 B (231.00 KiB)
  local-search       236544 B (231.00 KiB)
";
        assert_eq!(text, expected, "got:\n{text}");
    }

    use super::super::testutil::in_place_chain;

    #[test]
    fn text_report_with_in_place_aliases() {
        let input = in_place_chain();
        let plan = plan(&input).unwrap();
        let text = text_report(&input, &plan);
        let expected = "\
Memory plan: 4 buffers over 4 steps, alignment 256 B

  #  name  size  offset   end  live  kind                    written by
  0  conv  1024       0  1024  0..1                          step 0
  1  x     1024    1024  2048  0..2                          step 0
  2  bn    1024       0  1024  1..2  in place of conv        step 1
  3  relu  1024       0  1024  2..3  output, in place of bn  step 2

  naive (no reuse)       4096 B (4.00 KiB)
  lower bound            3072 B (3.00 KiB), at step 1 `step 1`
  lower bound in place   2048 B (2.00 KiB)
  arena                  2048 B (2.00 KiB), by greedy-by-size, 2 buffers in place
  saving vs naive        50.00 %
  saving vs lower bound  33.33 %
  arena / lower bound    0.667

Strategies:
                              in place    without aliases
  greedy-by-size     2048 B (2.00 KiB)  3072 B (3.00 KiB)  <- chosen, in place
  greedy-by-breadth  2048 B (2.00 KiB)  3072 B (3.00 KiB)
  pools              2048 B (2.00 KiB)  3072 B (3.00 KiB)
  local-search       2048 B (2.00 KiB)  3072 B (3.00 KiB)
";
        assert_eq!(text, expected, "got:\n{text}");
    }

    #[test]
    fn json_report_of_seed_003() {
        let mut input = seed_003_example();
        input.push(BufferRequest::scratch("im2col", 1000, 4));
        let plan = plan(&input).unwrap();
        let json = json_report(&input, &plan);
        assert_eq!(json["arena_bytes"], 236544);
        assert_eq!(json["naive_bytes"], 338944);
        assert_eq!(json["lower_bound_bytes"], 236544);
        assert_eq!(json["alignment"], 256);
        assert_eq!(json["strategy"], "greedy-by-size");
        assert_eq!(json["strategies"][2]["name"], "pools");
        assert_eq!(json["strategies"][2]["arena_bytes"], 236544);
        let tensors = json["tensors"].as_array().unwrap();
        assert_eq!(tensors.len(), 5);
        assert_eq!(
            tensors[2],
            json!({"name": "T3", "offset": 102400, "size": 81920,
                   "aligned_size": 81920, "first": 3, "last": 7})
        );
        assert_eq!(tensors[3]["output"], true);
        assert_eq!(tensors[4]["scratch"], true);
        assert!(tensors[0].get("scratch").is_none());
        assert!(tensors[0].get("alias_of").is_none());
        assert_eq!(json["in_place_lower_bound_bytes"], 236544);
        assert_eq!(json["strategies"][0]["in_place"], false);
        // With aliases: each names the tensor it overwrites.
        let input = in_place_chain();
        let json = json_report(&input, &super::super::plan(&input).unwrap());
        assert_eq!(json["tensors"][2]["alias_of"], "conv");
        assert_eq!(json["tensors"][3]["alias_of"], "bn");
        assert_eq!(json["in_place_lower_bound_bytes"], 2048);
        assert_eq!(json["lower_bound_bytes"], 3072);
        assert_eq!(json["strategies"][0]["in_place"], true);
        // Views name the tensor whose bytes they share.
        let mut input = in_place_chain();
        input.views.push(("flat".into(), BufferId(3)));
        let json = json_report(&input, &super::super::plan(&input).unwrap());
        assert_eq!(json["views"], json!([{"name": "flat", "alias_of": "relu"}]));
    }

    #[test]
    fn reports_of_an_empty_or_mismatched_plan_do_not_panic() {
        let empty = PlanInput::new(0);
        let p = plan(&empty).unwrap();
        let text = text_report(&empty, &p);
        assert!(text.contains("saving vs naive      n/a"), "{text}");
        assert!(text.contains("arena / lower bound  n/a"), "{text}");
        // A plan for another input: missing entries print as ? / null.
        let input = seed_003_example();
        let text = text_report(&input, &p);
        assert!(text.contains("  0  T1    102400       ?    ?  ?"), "{text}");
        assert!(text.contains("  naive (no reuse)     0 B\n"), "{text}");
        let json = json_report(&input, &p);
        assert_eq!(json["tensors"][0]["offset"], Value::Null);
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(0), "0 B");
        assert_eq!(human(1023), "1023 B");
        assert_eq!(human(1024), "1.00 KiB");
        assert_eq!(human(230 * 1024), "230.00 KiB");
        assert_eq!(human(3 << 30), "3.00 GiB");
        assert_eq!(human(usize::MAX), "16384.00 PiB");
    }

    #[test]
    fn concat_slices_in_the_reports() {
        let input = super::super::testutil::concat_example(256);
        let plan = plan(&input).unwrap();
        let json = json_report(&input, &plan);
        assert_eq!(json["tensors"][2]["alias_of"], "P");
        assert_eq!(json["tensors"][2]["alias_delta"], 256);
        assert_eq!(json["tensors"][0]["alias_delta"], 0);
        assert!(json["tensors"][1].get("alias_of").is_none());
        assert_eq!(json["strategies"][0]["slices"], true);
        let text = text_report(&input, &plan);
        assert!(text.contains("slice of P at +256"), "{text}");
        assert!(text.contains("2 Concat inputs in place"), "{text}");
        assert!(text.contains("<- chosen, slices"), "{text}");
    }

    #[test]
    fn overlaps_in_the_reports() {
        let input = super::super::testutil::pool_example(512, 4096);
        let plan = plan(&input).unwrap();
        let json = json_report(&input, &plan);
        assert_eq!(json["tensors"][2]["overlap_of"], "conv");
        assert_eq!(json["tensors"][2]["overlap_delta"], -256);
        assert_eq!(json["strategies"][0]["overlaps"], true);
        let text = text_report(&input, &plan);
        assert!(text.contains("overlaps conv at -256"), "{text}");
        assert!(text.contains("1 output overlapping its input"), "{text}");
        assert!(text.contains("<- chosen, overlaps"), "{text}");
        assert!(text.contains("without aliases"), "{text}");
    }
}
