//! Scheduling: a memory-aware topological order of a [`Program`]'s steps.
//!
//! Lowering emits steps in the model file's node order. The planner places buffers
//! over a fixed order, so that order bounds what any placement can reach: the
//! liveness lower bound is the largest sum of bytes live at one step. A file that
//! lists two parallel branches breadth-first (both big tensors first, then both
//! reductions of them) keeps both big tensors alive at once where another valid order
//! would not. [`memory_aware`] is greedy list scheduling: among the steps whose
//! dependencies have run, it takes the one after which the fewest bytes are live.
//! Greedy choices can also make things worse, so `compile` plans both orders and keeps
//! this one only when its arena is strictly smaller ([`ScheduleChoice`]).
//!
//! Dependencies ([`dependencies`]) are exact over buffers, not ONNX values: a step
//! follows the last earlier writer of every buffer it reads or writes, and a step that
//! writes a buffer again (an in-place accumulation of a variadic Sum) also follows
//! every reader of the previous contents. Graph inputs and weights are read-only and
//! have no producer. [`check_order`] is the independent check: in the new order every
//! step sees the same contents of every buffer as in file order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;

use crate::lower::{Operand, Program, Step};
use crate::plan::BufferId;

/// Which step order a compile kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// The order of the model file's nodes.
    FileOrder,
    /// [`memory_aware`]'s order.
    MemoryAware,
}

impl Schedule {
    /// `file order` or `memory-aware`, as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Schedule::FileOrder => "file order",
            Schedule::MemoryAware => "memory-aware",
        }
    }
}

/// The schedule a compile kept and the arena of each order it planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleChoice {
    pub kept: Schedule,
    /// The arena in file order, in bytes.
    pub file_order_arena: usize,
    /// The arena in the memory-aware order; `None` when that order is the file order
    /// (nothing to plan again).
    pub memory_aware_arena: Option<usize>,
}

impl fmt::Display for ScheduleChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = self.file_order_arena;
        match (self.kept, self.memory_aware_arena) {
            (_, None) => write!(
                f,
                "Schedule: file order (the memory-aware order is the same), arena {file} B"
            ),
            (Schedule::MemoryAware, Some(m)) => write!(
                f,
                "Schedule: memory-aware order kept: arena {m} B, {file} B in file order ({:.1} % less)",
                100.0 * (file - m) as f64 / file as f64
            ),
            (Schedule::FileOrder, Some(m)) => write!(
                f,
                "Schedule: file order kept: arena {file} B; the memory-aware order needs {m} B"
            ),
        }
    }
}

/// The buffers a step reads.
fn reads(step: &Step) -> impl Iterator<Item = BufferId> + '_ {
    step.inputs.iter().filter_map(|op| match *op {
        Operand::Buffer(b) => Some(b),
        Operand::Input(_) | Operand::Weight { .. } => None,
    })
}

/// The buffers a step writes: its outputs and its scratch.
fn writes(step: &Step) -> impl Iterator<Item = BufferId> + '_ {
    std::iter::once(step.output)
        .chain(step.extra_outputs.iter().copied())
        .chain(step.scratch)
}

/// For each step, the earlier steps (in file order) it must follow, sorted: the last
/// writer of every buffer it reads or writes, and, for every buffer it writes, every
/// step that read that buffer since its last write.
pub fn dependencies(program: &Program) -> Vec<Vec<usize>> {
    let n = program.buffers.len();
    let mut writer: Vec<Option<usize>> = vec![None; n];
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut deps = Vec::with_capacity(program.steps.len());
    for (i, s) in program.steps.iter().enumerate() {
        let mut d: Vec<usize> = reads(s).filter_map(|b| writer[b.index()]).collect();
        for b in writes(s) {
            d.extend(writer[b.index()]);
            d.append(&mut readers[b.index()]);
            writer[b.index()] = Some(i);
        }
        for b in reads(s) {
            readers[b.index()].push(i);
        }
        d.retain(|&p| p != i);
        d.sort_unstable();
        d.dedup();
        deps.push(d);
    }
    deps
}

/// Checks that `order` is a permutation of the program's steps in which every step
/// sees, for every buffer it reads or writes, the contents that the same step saw in
/// file order (the same last writer), and every buffer ends with the same last writer
/// (so graph outputs hold their final values). Independent of [`dependencies`].
pub fn check_order(program: &Program, order: &[usize]) -> Result<(), String> {
    let n = program.steps.len();
    if order.len() != n {
        return Err(format!(
            "{} steps ordered, the program has {n}",
            order.len()
        ));
    }
    let mut placed = vec![false; n];
    for &i in order {
        if i >= n || std::mem::replace(&mut placed[i], true) {
            return Err(format!("step {i} is out of range or ordered twice"));
        }
    }
    let (want_seen, want_last) = observe(program, 0..n);
    let (seen, last) = observe(program, order.iter().copied());
    if let Some(i) = (0..n).find(|&i| seen[i] != want_seen[i]) {
        let s = &program.steps[i];
        return Err(format!(
            "step {i} `{}` ({}) sees other buffer contents than in file order: last writers {:?}, not {:?}",
            s.node, s.op_type, seen[i], want_seen[i]
        ));
    }
    if let Some(b) = (0..last.len()).find(|&b| last[b] != want_last[b]) {
        return Err(format!(
            "buffer `{}` is last written by step {:?}, not {:?}",
            program.buffers[b].name, last[b], want_last[b]
        ));
    }
    Ok(())
}

/// Runs the steps in `order`; returns, per step, the last writer of each buffer it
/// reads and writes (operand order) when it runs, and each buffer's final writer.
#[allow(clippy::type_complexity)]
fn observe(
    program: &Program,
    order: impl Iterator<Item = usize>,
) -> (Vec<Vec<Option<usize>>>, Vec<Option<usize>>) {
    let mut last: Vec<Option<usize>> = vec![None; program.buffers.len()];
    let mut seen = vec![Vec::new(); program.steps.len()];
    for i in order {
        let s = &program.steps[i];
        seen[i] = reads(s).chain(writes(s)).map(|b| last[b.index()]).collect();
        for b in writes(s) {
            last[b.index()] = Some(i);
        }
    }
    (seen, last)
}

/// A topological order of the program's steps (a permutation of `0..steps.len()`)
/// chosen greedily to keep few bytes live: at each point, of the steps whose
/// dependencies have run, the one whose run changes the live bytes least — the bytes
/// of the buffer it first writes (if anything uses it later or it is a graph output)
/// minus those of the buffers it is the last remaining user of (not graph outputs) —
/// the smallest original index on ties, so a chain keeps file order. Scratch counts
/// for nothing: it lives during its step only. Deterministic; O((steps + operands)
/// log steps).
pub fn memory_aware(program: &Program) -> Vec<usize> {
    let n = program.steps.len();
    let deps = dependencies(program);
    let mut pending: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut successors = vec![Vec::new(); n];
    for (i, d) in deps.iter().enumerate() {
        for &p in d {
            successors[p].push(i);
        }
    }
    // The distinct buffers of each step; per buffer, its first step (its writer) and
    // the later steps that use it.
    let touched: Vec<Vec<BufferId>> = program
        .steps
        .iter()
        .map(|s| {
            let mut t: Vec<BufferId> = reads(s).chain(writes(s)).collect();
            t.sort_unstable();
            t.dedup();
            t
        })
        .collect();
    let nb = program.buffers.len();
    let mut first: Vec<Option<usize>> = vec![None; nb];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); nb];
    for (i, t) in touched.iter().enumerate() {
        for b in t {
            match first[b.index()] {
                None => first[b.index()] = Some(i),
                Some(_) => users[b.index()].push(i),
            }
        }
    }
    let mut output = vec![false; nb];
    for (_, b) in &program.outputs {
        output[b.index()] = true;
    }
    let mut remaining: Vec<usize> = users.iter().map(Vec::len).collect();
    let bytes = |b: BufferId| program.buffers[b.index()].len as i64 * 4;
    // Scores only fall as other steps run (a step becomes a last user), so a heap entry
    // whose score is stale is pushed again with the current one.
    let score = |i: usize, remaining: &[usize]| -> i64 {
        touched[i]
            .iter()
            .map(|&b| {
                let (k, kept) = (b.index(), output[b.index()]);
                if first[k] == Some(i) {
                    if remaining[k] > 0 || kept {
                        bytes(b)
                    } else {
                        0
                    }
                } else if remaining[k] == 1 && !kept {
                    -bytes(b)
                } else {
                    0
                }
            })
            .sum()
    };
    let mut heap: BinaryHeap<Reverse<(i64, usize)>> = (0..n)
        .filter(|&i| pending[i] == 0)
        .map(|i| Reverse((score(i, &remaining), i)))
        .collect();
    let mut done = vec![false; n];
    let mut order = Vec::with_capacity(n);
    while let Some(Reverse((s, i))) = heap.pop() {
        if done[i] {
            continue;
        }
        let now = score(i, &remaining);
        if now != s {
            heap.push(Reverse((now, i)));
            continue;
        }
        done[i] = true;
        order.push(i);
        for &b in &touched[i] {
            let k = b.index();
            if first[k] == Some(i) {
                continue;
            }
            remaining[k] -= 1;
            if remaining[k] == 1
                && let Some(&u) = users[k].iter().find(|&&u| !done[u])
                && pending[u] == 0
            {
                heap.push(Reverse((score(u, &remaining), u)));
            }
        }
        for &j in &successors[i] {
            pending[j] -= 1;
            if pending[j] == 0 {
                heap.push(Reverse((score(j, &remaining), j)));
            }
        }
    }
    debug_assert_eq!(order.len(), n, "dependencies only point backwards");
    order
}

/// Puts the program's steps in `order`, a permutation of their indices (from
/// [`memory_aware`]). Buffers, views and outputs name buffers, not step positions, so
/// nothing else changes.
pub fn reorder(program: &mut Program, order: &[usize]) {
    let mut steps: Vec<Option<Step>> = std::mem::take(&mut program.steps)
        .into_iter()
        .map(Some)
        .collect();
    program.steps = order
        .iter()
        .map(|&i| {
            steps[i]
                .take()
                .expect("order is a permutation of the steps")
        })
        .collect();
    assert_eq!(program.steps.len(), steps.len(), "order names every step");
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::ir::DType;
    use crate::lower::{Buffer, Io, Kernel};

    fn io(name: &str) -> Io {
        Io {
            name: name.into(),
            dtype: DType::F32,
            shape: vec![1],
        }
    }

    /// A copy step: scheduling and planning look only at operands.
    fn step(
        node: String,
        inputs: Vec<Operand>,
        output: BufferId,
        scratch: Option<BufferId>,
    ) -> Step {
        Step {
            node,
            op_type: "Test",
            kernel: Kernel::Copy,
            inputs,
            output,
            extra_outputs: Vec::new(),
            scratch,
            in_place: Vec::new(),
            overlap: None,
        }
    }

    /// A program over buffers of `lens` elements and graph input 0; `steps` are
    /// (buffers read, buffer written), `outputs` the graph outputs.
    fn program(lens: &[usize], steps: &[(&[u32], u32)], outputs: &[u32]) -> Program {
        Program {
            name: "test".into(),
            steps: steps
                .iter()
                .enumerate()
                .map(|(i, (reads, out))| {
                    let inputs = match reads {
                        [] => vec![Operand::Input(0)],
                        _ => reads
                            .iter()
                            .map(|&b| Operand::Buffer(BufferId(b)))
                            .collect(),
                    };
                    step(format!("s{i}"), inputs, BufferId(*out), None)
                })
                .collect(),
            buffers: lens
                .iter()
                .enumerate()
                .map(|(i, &len)| Buffer {
                    dtype: crate::tensor::DType::F32,
                    elems: len,
                    name: format!("b{i}"),
                    len,
                    scratch: false,
                })
                .collect(),
            weights: Vec::new(),
            weight_entries: Vec::new(),
            inputs: vec![io("x")],
            outputs: outputs.iter().map(|&b| (io("y"), BufferId(b))).collect(),
            views: Vec::new(),
        }
    }

    fn arena(program: &Program) -> usize {
        let input = crate::plan_input(program, 4);
        crate::plan::plan(&input).expect("plans").arena_bytes
    }

    /// Whether `order` puts every step after all its [`dependencies`].
    fn respects_dependencies(program: &Program, order: &[usize]) -> bool {
        let mut at = vec![usize::MAX; program.steps.len()];
        for (k, &i) in order.iter().enumerate() {
            at[i] = k;
        }
        dependencies(program)
            .iter()
            .enumerate()
            .all(|(i, d)| d.iter().all(|&p| at[p] < at[i]))
    }

    /// A → B1 (big) → C1 (small), A → B2 (big) → C2 (small), D reads C1 and C2; the
    /// file lists B1, B2, C1, C2, keeping both big tensors alive at once.
    fn two_branches() -> Program {
        program(
            &[1000, 100_000, 100_000, 100, 100, 100],
            &[
                (&[], 0),
                (&[0], 1),
                (&[0], 2),
                (&[1], 3),
                (&[2], 4),
                (&[3, 4], 5),
            ],
            &[5],
        )
    }

    #[test]
    fn two_branches_run_one_after_the_other_in_a_smaller_arena() {
        let p = two_branches();
        let order = memory_aware(&p);
        assert_eq!(order, [0, 1, 3, 2, 4, 5]);
        check_order(&p, &order).unwrap();
        let mut q = p.clone();
        reorder(&mut q, &order);
        let names: Vec<&str> = q.steps.iter().map(|s| s.node.as_str()).collect();
        assert_eq!(names, ["s0", "s1", "s3", "s2", "s4", "s5"]);
        let (file, aware) = (arena(&p), arena(&q));
        assert!(aware < file, "memory-aware {aware} B, file order {file} B");
        // Both big tensors (400 kB each) live at once in file order, never after.
        assert!(file >= 800_000 && aware < 500_000, "{file} {aware}");
    }

    #[test]
    fn a_chain_keeps_file_order() {
        let p = program(
            &[10, 1000, 10, 100_000, 1],
            &[(&[], 0), (&[0], 1), (&[1], 2), (&[2], 3), (&[3], 4)],
            &[4],
        );
        assert_eq!(memory_aware(&p), [0, 1, 2, 3, 4]);
    }

    /// s1 writes `s`, s2 reads it, s4 accumulates into it: s4 must follow s2 (the
    /// reader of the previous contents) although, freeing c, the greedy choice would
    /// otherwise take it first.
    #[test]
    fn accumulation_stays_after_readers_of_the_previous_contents() {
        let p = program(
            &[10, 10, 1000, 10, 10],
            &[
                (&[], 0),     // a
                (&[0], 1),    // s = f(a)
                (&[1], 2),    // r = g(s), large
                (&[], 3),     // c
                (&[3], 1),    // s += c
                (&[2, 1], 4), // out = h(r, s)
            ],
            &[4],
        );
        assert_eq!(dependencies(&p)[4], [1, 2, 3]);
        let order = memory_aware(&p);
        assert_eq!(order, [0, 1, 3, 2, 4, 5]);
        check_order(&p, &order).unwrap();
        // The reader after the accumulation, or the accumulation before the first write.
        assert!(check_order(&p, &[0, 1, 3, 4, 2, 5]).is_err());
        assert!(check_order(&p, &[0, 3, 4, 1, 2, 5]).is_err());
    }

    #[test]
    fn check_order_rejects_what_is_not_a_valid_permutation() {
        let p = two_branches();
        check_order(&p, &[0, 1, 2, 3, 4, 5]).unwrap();
        check_order(&p, &[0, 2, 4, 1, 3, 5]).unwrap();
        assert!(check_order(&p, &[0, 1, 2, 3, 4]).is_err(), "a step missing");
        assert!(
            check_order(&p, &[0, 1, 1, 3, 4, 5]).is_err(),
            "a step twice"
        );
        assert!(
            check_order(&p, &[0, 1, 2, 3, 4, 6]).is_err(),
            "out of range"
        );
        assert!(
            check_order(&p, &[1, 0, 2, 3, 4, 5]).is_err(),
            "read before write"
        );
        assert!(
            check_order(&p, &[0, 1, 2, 3, 5, 4]).is_err(),
            "output too early"
        );
    }

    /// 100k steps, each reading the one before and every 7th also one 50 back, schedule
    /// in well under a second (near-linear), into a valid order.
    #[test]
    fn a_hundred_thousand_steps() {
        let n = 100_000u32;
        let reads: Vec<Vec<u32>> = (0..n)
            .map(|i| match i {
                0 => vec![],
                _ if i % 7 == 0 && i >= 50 => vec![i - 1, i - 50],
                _ => vec![i - 1],
            })
            .collect();
        let steps: Vec<(&[u32], u32)> = reads.iter().zip(0..).map(|(r, i)| (&r[..], i)).collect();
        let lens: Vec<usize> = (0..n as usize).map(|i| 1 + i % 13 * 100).collect();
        let p = program(&lens, &steps, &[n - 1]);
        let start = std::time::Instant::now();
        let order = memory_aware(&p);
        let took = start.elapsed();
        check_order(&p, &order).unwrap();
        assert!(took.as_secs_f64() < 2.0, "{took:?}");
    }

    /// Random programs: step `i` reads up to three earlier steps' buffers (or the graph
    /// input), and either writes a new buffer or accumulates into an earlier one; some
    /// have scratch, some buffers are graph outputs.
    fn arb_program() -> impl Strategy<Value = Program> {
        let one = (
            prop::collection::vec(any::<prop::sample::Index>(), 0..4),
            prop::option::weighted(0.2, any::<prop::sample::Index>()),
            any::<bool>(),
            prop::sample::select(vec![1usize, 16, 100, 4096]),
            0u8..8,
        );
        prop::collection::vec(one, 1..40).prop_map(|steps| {
            let mut p = program(&[], &[], &[]);
            for (i, (reads, accumulate, scratch, len, kind)) in steps.into_iter().enumerate() {
                let written: Vec<BufferId> = p.steps.iter().map(|s| s.output).collect();
                let inputs: Vec<Operand> = match written.len() {
                    0 => vec![Operand::Input(0)],
                    w => reads
                        .iter()
                        .map(|r| Operand::Buffer(written[r.index(w)]))
                        .collect(),
                };
                let new_buffer = |p: &mut Program, name: String, scratch| {
                    p.buffers.push(Buffer {
                        name,
                        len,
                        scratch,
                        dtype: crate::tensor::DType::F32,
                        elems: len,
                    });
                    BufferId(p.buffers.len() as u32 - 1)
                };
                let output = match accumulate {
                    Some(a) if !written.is_empty() => {
                        let target = written[a.index(written.len())];
                        if inputs.contains(&Operand::Buffer(target)) {
                            new_buffer(&mut p, format!("t{i}"), false)
                        } else {
                            target
                        }
                    }
                    _ => new_buffer(&mut p, format!("t{i}"), false),
                };
                let scratch = scratch.then(|| new_buffer(&mut p, format!("s{i}"), true));
                if kind == 0 && !p.outputs.iter().any(|(_, b)| *b == output) {
                    p.outputs.push((io("y"), output));
                }
                p.steps.push(step(format!("n{i}"), inputs, output, scratch));
            }
            p
        })
    }

    /// A permutation from `seed` (splitmix64 Fisher–Yates).
    fn shuffled(n: usize, mut seed: u64) -> Vec<usize> {
        let mut v: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            v.swap(i, ((z ^ (z >> 31)) % (i as u64 + 1)) as usize);
        }
        v
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The order is valid by the checker, deterministic, and plannable; the
        /// checker and the dependencies agree on arbitrary permutations.
        #[test]
        fn memory_aware_is_a_valid_deterministic_order(p in arb_program(), seed: u64) {
            let order = memory_aware(&p);
            prop_assert_eq!(check_order(&p, &order), Ok(()));
            prop_assert!(respects_dependencies(&p, &order));
            prop_assert_eq!(&memory_aware(&p), &order);
            let mut q = p.clone();
            reorder(&mut q, &order);
            arena(&q);
            let perm = shuffled(p.steps.len(), seed);
            prop_assert_eq!(check_order(&p, &perm).is_ok(), respects_dependencies(&p, &perm));
        }
    }
}
