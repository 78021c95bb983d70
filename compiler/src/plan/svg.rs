//! The arena as a picture: time (steps) across, byte offset up, one rectangle per
//! buffer over the steps it is live. Gaps are wasted bytes, the line at the lower
//! bound shows how much of the arena any plan without aliasing must keep, and the
//! tallest column of rectangles is the peak. Hovering a rectangle names it (SVG
//! `<title>`); the larger ones carry their name and size.
//!
//! Like the text report it does not trust `plan` to match `input`: buffers missing
//! from either are skipped, and nothing in it can panic.

use std::fmt::Write as _;

use super::report::human;
use super::{MemoryPlan, PlanInput};

const PLOT_HEIGHT: f64 = 620.0;
const MIN_PLOT_WIDTH: f64 = 900.0;
const MAX_PLOT_WIDTH: f64 = 1800.0;
const PX_PER_STEP: f64 = 10.0;
const LEFT: f64 = 86.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 78.0;
const BOTTOM: f64 = 56.0;
const FONT: f64 = 11.0;
/// More ticks than any axis draws: a bound on the loops, whatever the input.
const MAX_TICKS: usize = 100;
/// Average advance of a character of the label font, for fitting labels.
const CHAR_WIDTH: f64 = 6.2;

const TENSOR_STROKE: &str = "#ffffff";
const SCRATCH_FILL: &str = "#f08c3c";
const OUTPUT_FILL: &str = "#58b368";
const BOUND_COLOUR: &str = "#c0392b";
const ARENA_COLOUR: &str = "#222222";
const PEAK_COLOUR: &str = "#888888";

/// An SVG document drawing `plan` for `input`.
pub fn svg(input: &PlanInput, plan: &MemoryPlan) -> String {
    let steps = input.steps.max(1) as f64;
    let plot_w = (steps * PX_PER_STEP).clamp(MIN_PLOT_WIDTH, MAX_PLOT_WIDTH);
    let (width, height) = (LEFT + plot_w + RIGHT, TOP + PLOT_HEIGHT + BOTTOM);
    let top_bytes = plan.arena_bytes.max(plan.lower_bound_bytes).max(1) as f64;
    let x = |step: f64| LEFT + step / steps * plot_w;
    let y = |bytes: f64| TOP + PLOT_HEIGHT - bytes / top_bytes * PLOT_HEIGHT;

    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="{FONT}">"#
    );
    let _ = writeln!(
        out,
        r##"<rect width="100%" height="100%" fill="#ffffff"/>"##
    );
    title(&mut out, input, plan);
    let _ = writeln!(
        out,
        r##"<rect x="{LEFT}" y="{TOP}" width="{plot_w:.1}" height="{PLOT_HEIGHT}" fill="#f4f4f4"/>"##
    );
    axes(&mut out, input.steps, top_bytes, plot_w, &x, &y);

    // An input written over in place hands its bytes to the output at the step that
    // writes it: its rectangle ends where the output's begins.
    let mut overwritten = vec![false; input.buffers.len()];
    let overlapped = plan.overlap_of.iter().flatten().map(|(x, _)| x);
    for x in plan.alias_of.iter().flatten().chain(overlapped) {
        if let Some(slot) = overwritten.get_mut(x.index()) {
            *slot = true;
        }
    }
    // So does an input a pooling output overlaps (the planes it reads there are the
    // ones the output has not reached), and a Concat input placed in the Concat's
    // output (a slice).
    for (c, s) in plan.slice_of.iter().enumerate() {
        if let (Some(_), Some(slot)) = (s, overwritten.get_mut(c)) {
            *slot = true;
        }
    }
    // Rectangles first, then labels, so that no rectangle hides a neighbour's label.
    let mut labels = String::new();
    for (i, buffer) in input.buffers.iter().enumerate() {
        let (Some(&offset), Some(&size), Some(life)) = (
            plan.offsets.get(i),
            plan.aligned_sizes.get(i),
            plan.lifetimes.get(i),
        ) else {
            continue;
        };
        if size == 0 {
            continue;
        }
        let end = if overwritten[i] && life.last > life.first {
            life.last as f64
        } else {
            life.last as f64 + 1.0
        };
        let (x0, x1) = (x(life.first as f64), x(end));
        let (y0, y1) = (y(offset as f64 + size as f64), y(offset as f64));
        let (w, h) = (x1 - x0, y1 - y0);
        let fill = if buffer.scratch {
            SCRATCH_FILL.to_string()
        } else if buffer.live_to_end {
            OUTPUT_FILL.to_string()
        } else {
            tensor_colour(i)
        };
        let name = escape(&buffer.name);
        // A buffer thinner than a pixel still shows, as a line without outline.
        let (h, stroke) = if h < 2.0 { (h.max(1.0), 0.0) } else { (h, 0.6) };
        let _ = writeln!(
            out,
            r#"<rect x="{x0:.2}" y="{y0:.2}" width="{w:.2}" height="{h:.2}" fill="{fill}" stroke="{TENSOR_STROKE}" stroke-width="{stroke}"><title>{name}: {} at bytes {offset}..{}, steps {life}</title></rect>"#,
            human(size),
            offset.saturating_add(size),
        );
        label(&mut labels, &buffer.name, size, (x0, y0, w, h));
    }
    out.push_str(&labels);

    lines(&mut out, plan, plot_w, &x, &y);
    legend(&mut out, plot_w);
    out.push_str("</svg>\n");
    out
}

/// Two lines: what the picture is, then the totals.
fn title(out: &mut String, input: &PlanInput, plan: &MemoryPlan) {
    let ratio = if plan.lower_bound_bytes > 0 {
        format!(
            " ({:.3} × bound)",
            plan.arena_bytes as f64 / plan.lower_bound_bytes as f64
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="24" font-size="16" font-weight="bold">Memory plan: arena {} by {}{ratio}</text>"#,
        human(plan.arena_bytes),
        escape(plan.strategy),
    );
    let _ = writeln!(
        out,
        r##"<text x="{LEFT}" y="44" font-size="12" fill="#444444">lower bound {}{} · naive {} · {} buffers over {} steps · alignment {} B</text>"##,
        human(plan.lower_bound_bytes),
        match plan.in_place_count() {
            0 => String::new(),
            n => format!(
                " ({} with {n} buffers in place)",
                human(plan.in_place_lower_bound_bytes)
            ),
        },
        human(plan.naive_bytes),
        input.buffers.len(),
        input.steps,
        plan.alignment,
    );
}

/// Tick marks and labels on both axes, and the axis titles.
fn axes(
    out: &mut String,
    steps: usize,
    top_bytes: f64,
    plot_w: f64,
    x: &dyn Fn(f64) -> f64,
    y: &dyn Fn(f64) -> f64,
) {
    let bottom = TOP + PLOT_HEIGHT;
    // Step s is drawn over [s, s + 1): its tick sits in the middle.
    let step_tick = nice_step(steps as f64, plot_w / 60.0).max(1.0);
    for k in 0..=MAX_TICKS {
        let s = k as f64 * step_tick;
        if s >= steps as f64 {
            break;
        }
        let px = x(s + 0.5);
        let _ = writeln!(
            out,
            r##"<line x1="{px:.1}" y1="{bottom}" x2="{px:.1}" y2="{:.1}" stroke="#999999"/><text x="{px:.1}" y="{:.1}" text-anchor="middle" fill="#444444">{s}</text>"##,
            bottom + 5.0,
            bottom + 18.0,
        );
    }
    let (unit, unit_name) = byte_unit(top_bytes);
    let byte_tick = nice_step(top_bytes / unit, PLOT_HEIGHT / 45.0) * unit;
    for k in 0..=MAX_TICKS {
        let b = k as f64 * byte_tick;
        if b > top_bytes || byte_tick <= 0.0 {
            break;
        }
        let py = y(b);
        let _ = writeln!(
            out,
            r##"<line x1="{:.1}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#e2e2e2"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#444444">{} {unit_name}</text>"##,
            LEFT - 5.0,
            LEFT + plot_w,
            LEFT - 8.0,
            py + 4.0,
            trim_number(b / unit),
        );
    }
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="12" fill="#222222">step (execution order; a buffer spans the steps it is live)</text>"##,
        LEFT + plot_w / 2.0,
        bottom + 40.0,
    );
    let (lx, ly) = (20.0, TOP + PLOT_HEIGHT / 2.0);
    let _ = writeln!(
        out,
        r##"<text x="{lx}" y="{ly:.1}" transform="rotate(-90 {lx} {ly:.1})" text-anchor="middle" font-size="12" fill="#222222">byte offset in the arena</text>"##
    );
}

/// The buffer's name, and its size below when there is room; nothing when even
/// a short name would not fit.
fn label(out: &mut String, name: &str, size: usize, (x0, y0, w, h): (f64, f64, f64, f64)) {
    if h < FONT + 2.0 || w < 3.0 * CHAR_WIDTH + 4.0 {
        return;
    }
    let fits = ((w - 4.0) / CHAR_WIDTH) as usize;
    let shown: String = if name.chars().count() <= fits {
        name.to_string()
    } else {
        let keep = fits.saturating_sub(1);
        name.chars().take(keep).chain(['…']).collect()
    };
    let (cx, cy) = (x0 + w / 2.0, y0 + h / 2.0);
    let size_text = compact(size);
    // The size line is a point smaller, so its characters are narrower.
    let size_fits = (w - 4.0) / (CHAR_WIDTH * (FONT - 1.0) / FONT);
    let two_lines = h >= 2.0 * FONT + 6.0 && size_text.chars().count() as f64 <= size_fits;
    let first_y = if two_lines {
        cy - 2.0
    } else {
        cy + FONT / 2.0 - 1.0
    };
    let _ = writeln!(
        out,
        r##"<text x="{cx:.1}" y="{first_y:.1}" text-anchor="middle" fill="#1a1a1a">{}</text>"##,
        escape(&shown)
    );
    if two_lines {
        let _ = writeln!(
            out,
            r##"<text x="{cx:.1}" y="{:.1}" text-anchor="middle" fill="#333333" font-size="{:.0}">{size_text}</text>"##,
            cy + FONT,
            FONT - 1.0
        );
    }
}

/// The arena and lower-bound lines, labelled in the right margin, and the peak step.
fn lines(
    out: &mut String,
    plan: &MemoryPlan,
    plot_w: f64,
    x: &dyn Fn(f64) -> f64,
    y: &dyn Fn(f64) -> f64,
) {
    let right = LEFT + plot_w;
    if let Some(peak) = plan.peak_step {
        let px = x(peak as f64 + 0.5);
        let _ = writeln!(
            out,
            r#"<line x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{:.1}" stroke="{PEAK_COLOUR}" stroke-dasharray="2 3"/><text x="{px:.1}" y="{:.1}" text-anchor="middle" fill="{PEAK_COLOUR}">peak</text>"#,
            TOP + PLOT_HEIGHT,
            TOP - 4.0,
        );
    }
    let (arena_y, bound_y) = (y(plan.arena_bytes as f64), y(plan.lower_bound_bytes as f64));
    let _ = writeln!(
        out,
        r#"<line x1="{LEFT}" y1="{arena_y:.1}" x2="{right:.1}" y2="{arena_y:.1}" stroke="{ARENA_COLOUR}" stroke-width="1.5"/>"#
    );
    let _ = writeln!(
        out,
        r#"<line x1="{LEFT}" y1="{bound_y:.1}" x2="{right:.1}" y2="{bound_y:.1}" stroke="{BOUND_COLOUR}" stroke-width="1.5" stroke-dasharray="6 4"/>"#
    );
    // Keep the two labels apart when the lines are close (or the same).
    let arena_text_y = arena_y + 4.0;
    let bound_text_y = (bound_y + 4.0).max(arena_text_y + 15.0);
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{arena_text_y:.1}" fill="{ARENA_COLOUR}">arena {}</text>"#,
        right + 6.0,
        human(plan.arena_bytes)
    );
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{bound_text_y:.1}" fill="{BOUND_COLOUR}">lower bound {}</text>"#,
        right + 6.0,
        human(plan.lower_bound_bytes)
    );
}

/// Swatches for the three kinds of rectangle, in the right margin at the bottom,
/// where no line label or peak mark can fall.
fn legend(out: &mut String, plot_w: f64) {
    let x = LEFT + plot_w + 8.0;
    let kinds = [
        (tensor_colour(0), "tensor"),
        (SCRATCH_FILL.to_string(), "kernel scratch"),
        (OUTPUT_FILL.to_string(), "graph output"),
    ];
    for (row, (fill, name)) in kinds.into_iter().enumerate() {
        let y = TOP + PLOT_HEIGHT - 12.0 - 18.0 * (2 - row) as f64;
        let _ = writeln!(
            out,
            r##"<rect x="{x:.1}" y="{y:.1}" width="12" height="12" fill="{fill}"/><text x="{:.1}" y="{:.1}" fill="#444444">{name}</text>"##,
            x + 17.0,
            y + 10.0
        );
    }
}

/// Cool, distinct colours for tensors: hues from cyan to violet by the golden
/// angle, so neighbours in the input (often neighbours in the picture) differ.
fn tensor_colour(i: usize) -> String {
    let t = (i as f64 * 0.618_033_988_75).fract();
    let hue = 185.0 + 95.0 * t;
    let lightness = if i.is_multiple_of(2) { 0.62 } else { 0.72 };
    hsl_hex(hue, 0.55, lightness)
}

/// `#rrggbb` of an HSL colour (hue in degrees, the rest in 0..=1).
fn hsl_hex(hue: f64, saturation: f64, lightness: f64) -> String {
    let c = (1.0 - (2.0 * lightness - 1.0).abs()) * saturation;
    let h = (hue.rem_euclid(360.0)) / 60.0;
    let x = c * (1.0 - (h.rem_euclid(2.0) - 1.0).abs());
    let (r, g, b) = match h as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = lightness - c / 2.0;
    let byte = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    format!("#{:02x}{:02x}{:02x}", byte(r), byte(g), byte(b))
}

/// A round tick spacing (1, 2 or 5 × 10^k) giving at most about `max_ticks` ticks
/// over `range`, or 0 for an empty range.
fn nice_step(range: f64, max_ticks: f64) -> f64 {
    if range <= 0.0 || !range.is_finite() {
        return 0.0;
    }
    let rough = range / max_ticks.max(1.0);
    let magnitude = 10f64.powf(rough.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|&s| s >= rough)
        .unwrap_or(10.0 * magnitude)
}

/// The binary unit for tick labels over `0..=top` bytes, and its name.
fn byte_unit(top: f64) -> (f64, &'static str) {
    [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")]
        .into_iter()
        .map(|(u, name)| (u as f64, name))
        .find(|&(u, _)| top >= 2.0 * u)
        .unwrap_or((1.0, "B"))
}

/// `value` without a fractional part when it has none, else with one decimal.
fn trim_number(value: f64) -> String {
    if (value - value.round()).abs() < 1e-9 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// Bytes in binary units with three significant digits: `144 KiB`, `1.07 MiB`.
fn compact(bytes: usize) -> String {
    let (unit, name) = byte_unit(2.0 * bytes as f64);
    let value = bytes as f64 / unit;
    match value {
        v if v >= 100.0 || unit == 1.0 => format!("{v:.0} {name}"),
        v if v >= 10.0 => format!("{v:.1} {name}"),
        v => format!("{v:.2} {name}"),
    }
}

/// Text safe inside an SVG element or attribute.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{alexnet, network_like, seed_003_example};
    use super::super::{BufferRequest, Lifetime, PlanInput, plan};
    use super::*;

    /// Every element opened is closed, in order (a well-formedness check without
    /// an XML parser: no text here contains `<` unescaped).
    fn assert_balanced(doc: &str) {
        let mut open: Vec<&str> = Vec::new();
        for tag in doc.split('<').skip(1) {
            let body = tag.split('>').next().unwrap();
            if let Some(name) = body.strip_prefix('/') {
                assert_eq!(open.pop(), Some(name), "in {doc}");
            } else if !body.ends_with('/') {
                open.push(body.split_whitespace().next().unwrap());
            }
        }
        assert!(open.is_empty(), "unclosed {open:?}");
    }

    #[test]
    fn one_rectangle_per_buffer_with_labels_lines_and_totals() {
        let mut input = seed_003_example();
        input.push(BufferRequest::scratch("im2col", 1000, 4));
        let p = plan(&input).unwrap();
        let doc = svg(&input, &p);
        assert!(doc.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(doc.ends_with("</svg>\n"));
        assert_balanced(&doc);
        assert_eq!(doc.matches("<title>").count(), 5);
        assert!(doc.contains("<title>T3: 80.00 KiB at bytes 102400..184320, steps 3..=7</title>"));
        assert!(doc.contains(&format!("fill=\"{SCRATCH_FILL}\"")));
        assert!(doc.contains(&format!("fill=\"{OUTPUT_FILL}\"")));
        // Big rectangles are labelled with name and size.
        assert!(doc.contains(">T1</text>") && doc.contains(">100 KiB</text>"));
        assert!(doc.contains("arena 231.00 KiB by greedy-by-size (1.000 × bound)"));
        assert!(doc.contains(">lower bound 231.00 KiB</text>"));
        assert!(doc.contains(">peak</text>"));
        // Deterministic.
        assert_eq!(doc, svg(&input, &p));
    }

    #[test]
    fn names_are_escaped_and_shortened_to_fit() {
        let mut input = PlanInput::new(2);
        input.push(BufferRequest::new("<a & \"b\">", 4096, 0, vec![1]));
        input.push(BufferRequest::new(
            "a_very_long_tensor_name_".repeat(20),
            4096,
            1,
            vec![],
        ));
        let doc = svg(&input, &plan(&input).unwrap());
        assert_balanced(&doc);
        assert!(doc.contains("&lt;a &amp; &quot;b&quot;&gt;"));
        assert!(!doc.contains("<a &"));
        assert!(doc.contains("…</text>"));
    }

    #[test]
    fn empty_mismatched_and_extreme_plans_draw_without_panicking() {
        let empty = PlanInput::new(0);
        let p = plan(&empty).unwrap();
        assert_balanced(&svg(&empty, &p));
        // A plan for another input: buffers without entries are skipped.
        let doc = svg(&seed_003_example(), &p);
        assert_balanced(&doc);
        assert_eq!(doc.matches("<title>").count(), 0);
        // Offsets and steps at the ends of usize.
        let mut input = PlanInput::new(usize::MAX);
        input.alignment = 1;
        input.push(BufferRequest::new(
            "a",
            usize::MAX / 2,
            0,
            vec![usize::MAX - 1],
        ));
        input.push(BufferRequest::output("b", usize::MAX / 2, 5));
        let p = plan(&input).unwrap();
        assert_balanced(&svg(&input, &p));
        let mut broken = p;
        broken.offsets[0] = usize::MAX;
        broken.lifetimes[1] = Lifetime::new(usize::MAX, usize::MAX);
        assert_balanced(&svg(&input, &broken));
    }

    #[test]
    fn real_sized_inputs_stay_compact() {
        for input in [alexnet(), network_like(600, 1)] {
            let doc = svg(&input, &plan(&input).unwrap());
            assert_balanced(&doc);
            assert_eq!(doc.matches("<title>").count(), input.buffers.len());
            // About 300 bytes per buffer: a 600-buffer picture opens instantly.
            assert!(
                doc.len() < 400 * input.buffers.len() + 20_000,
                "{}",
                doc.len()
            );
        }
    }

    #[test]
    fn ticks_colours_and_units() {
        assert_eq!(nice_step(100.0, 10.0), 10.0);
        assert_eq!(nice_step(89.0, 15.0), 10.0);
        assert_eq!(nice_step(0.0, 10.0), 0.0);
        assert_eq!(nice_step(f64::NAN, 10.0), 0.0);
        assert_eq!(byte_unit(3.0 * 1024.0 * 1024.0), (1024.0 * 1024.0, "MiB"));
        assert_eq!(byte_unit(100.0), (1.0, "B"));
        assert_eq!(compact(147456), "144 KiB");
        assert_eq!(compact(1119744), "1.07 MiB");
        assert_eq!(compact(12), "12 B");
        assert_eq!(trim_number(2.0), "2");
        assert_eq!(trim_number(0.5), "0.5");
        assert_eq!(hsl_hex(0.0, 1.0, 0.5), "#ff0000");
        assert_eq!(hsl_hex(240.0, 1.0, 0.5), "#0000ff");
        assert_ne!(tensor_colour(0), tensor_colour(1));
    }
}
