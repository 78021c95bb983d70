//! A byte-level simulation of a plan, for tests: an oracle that shares nothing with
//! the validator. Every step first reads its inputs, then writes a tag unique to each
//! buffer it defines over that buffer's bytes (its real size, not the aligned one;
//! a later write of the same buffer, an accumulation, is one of its reads);
//! every read must find its buffer's tag on each of its bytes, before the writes of
//! the step and after them (a kernel reads while it writes), except that an input
//! written over in place is read only before (the kernel reads each element before
//! it writes it). A buffer placed as a slice of a Concat's output is not copied: the
//! step writes its output's tag on the other bytes only, the slice must still hold its
//! own tag after that, and then its bytes become the output's. A step whose output
//! overlaps its input writes plane by plane, as the pooling kernel does: output plane
//! `q`, then a read of input plane `q`, which must still hold the input's tag. Graph
//! outputs must be intact after the last step.

use super::{MemoryPlan, PlanInput};

/// `Ok` when no read ever finds another buffer's bytes; else the first one that does.
pub fn simulate(input: &PlanInput, plan: &MemoryPlan) -> Result<(), String> {
    let n = input.buffers.len();
    let mut reads: Vec<Vec<usize>> = vec![Vec::new(); input.steps];
    let mut writes: Vec<Vec<usize>> = vec![Vec::new(); input.steps];
    for (i, b) in input.buffers.iter().enumerate() {
        writes[b.def].push(i);
        for &u in &b.uses {
            reads[u].push(i);
        }
    }
    // The step at which each buffer is written over in place, if it is.
    let mut overwritten_at = vec![None; n];
    for (y, x) in plan.alias_of.iter().enumerate() {
        if let Some(x) = x {
            overwritten_at[x.index()] = Some(input.buffers[y].def);
        }
    }
    // Per buffer, its slices (the parent's step does not copy them).
    let mut slices: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (c, s) in plan.slice_of.iter().enumerate() {
        if let Some((p, delta)) = *s {
            if plan.offsets[p.index()] + delta != plan.offsets[c]
                || delta + input.buffers[c].size > input.buffers[p.index()].size
            {
                return Err(format!(
                    "`{}` is not at byte {delta} of `{}`",
                    input.buffers[c].name,
                    input.buffers[p.index()].name
                ));
            }
            slices[p.index()].push(c);
            overwritten_at[c] = Some(input.buffers[p.index()].def);
        }
    }
    // Per output overlapping its input: the input and the kernel's plane order.
    let mut planes = vec![None; n];
    for (y, o) in plan.overlap_of.iter().enumerate() {
        if let Some((x, _)) = *o {
            let Some((named, order)) = input.buffers[y].overlap_of else {
                return Err(format!("`{}` has no plane order", input.buffers[y].name));
            };
            if named != x {
                return Err(format!(
                    "`{}` overlaps a buffer it does not read by planes",
                    input.buffers[y].name
                ));
            }
            planes[y] = Some((x.index(), order));
            overwritten_at[x.index()] = Some(input.buffers[y].def);
        }
    }
    for i in 0..n {
        if plan.offsets[i] + input.buffers[i].size > plan.arena_bytes {
            return Err(format!(
                "`{}` lies outside the arena",
                input.buffers[i].name
            ));
        }
    }
    let mut mem = vec![0u32; plan.arena_bytes];
    let tag = |i: usize| i as u32 + 1;
    let bytes = |i: usize| plan.offsets[i]..plan.offsets[i] + input.buffers[i].size;
    let check = |mem: &[u32], i: usize, when: &str| -> Result<(), String> {
        match mem[bytes(i)].iter().position(|&t| t != tag(i)) {
            None => Ok(()),
            Some(k) => {
                let found = mem[plan.offsets[i] + k];
                let by = match found {
                    0 => "never written".to_string(),
                    t => format!("holds `{}`", input.buffers[t as usize - 1].name),
                };
                Err(format!(
                    "{when}: byte {k} of `{}` {by}",
                    input.buffers[i].name
                ))
            }
        }
    };
    for step in 0..input.steps {
        // A use at the defining step is part of that write (a kernel reading its own
        // output), checked after it.
        for &i in reads[step]
            .iter()
            .filter(|&&i| input.buffers[i].def != step)
        {
            check(&mem, i, &format!("step {step}, before its writes"))?;
        }
        for &i in &writes[step] {
            if let Some((x, order)) = planes[i] {
                for q in 0..order.planes {
                    let y_at = plan.offsets[i] + q * order.out_plane;
                    mem[y_at..y_at + order.out_plane].fill(tag(i));
                    let x_at = plan.offsets[x] + q * order.in_plane;
                    if let Some(k) = mem[x_at..x_at + order.in_plane]
                        .iter()
                        .position(|&t| t != tag(x))
                    {
                        let found = mem[x_at + k] as usize;
                        let by = input
                            .buffers
                            .get(found.wrapping_sub(1))
                            .map_or("nothing", |b| &b.name);
                        return Err(format!(
                            "step {step}, plane {q}: byte {} of `{}` holds `{by}`",
                            q * order.in_plane + k,
                            input.buffers[x].name,
                        ));
                    }
                }
                continue;
            }
            let start = plan.offsets[i];
            let mut at = start;
            let mut kept: Vec<_> = slices[i].iter().map(|&c| bytes(c)).collect();
            kept.sort_unstable_by_key(|r| r.start);
            for r in kept {
                mem[at..r.start.max(at)].fill(tag(i));
                at = at.max(r.end);
            }
            mem[at.min(start + input.buffers[i].size)..start + input.buffers[i].size].fill(tag(i));
            for &c in &slices[i] {
                check(&mem, c, &format!("step {step}, a slice after its writes"))?;
                mem[bytes(c)].fill(tag(i));
            }
        }
        // An input the step overwrote in place is the one read that may have changed;
        // it dies here, so no later step reads it.
        for &i in reads[step]
            .iter()
            .filter(|&&i| overwritten_at[i] != Some(step))
        {
            check(&mem, i, &format!("step {step}, after its writes"))?;
        }
        for &i in &writes[step] {
            check(&mem, i, &format!("step {step}, its own output"))?;
        }
    }
    for (i, b) in input.buffers.iter().enumerate() {
        if b.live_to_end {
            check(&mem, i, "after the last step")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::{BufferId, BufferRequest, plan, validate};
    use super::*;

    /// conv → relu in place over it, and `x` read beside them.
    fn chain() -> PlanInput {
        let mut input = PlanInput::new(3);
        let conv = input.push(BufferRequest::new("conv", 1000, 0, vec![1]));
        input.push(BufferRequest::new("x", 1000, 0, vec![1]));
        input.push(BufferRequest {
            in_place_of: vec![conv],
            ..BufferRequest::output("relu", 1000, 1)
        });
        input
    }

    #[test]
    fn an_in_place_step_may_overwrite_only_its_dying_input() {
        let input = chain();
        let good = plan(&input).unwrap();
        assert_eq!(good.alias(BufferId(2)), Some(BufferId(0)));
        simulate(&input, &good).unwrap();
        // The same alias where conv is read after the relu: the read finds the relu.
        let mut late = input.clone();
        late.buffers[0].uses.push(2);
        assert_eq!(
            simulate(&late, &good).unwrap_err(),
            "step 2, before its writes: byte 0 of `conv` holds `relu`"
        );
        // Without the alias record, sharing bytes with a live input is caught after
        // the write, when the kernel still reads it.
        let mut unrecorded = good.clone();
        unrecorded.alias_of = vec![None; 3];
        assert_eq!(
            simulate(&input, &unrecorded).unwrap_err(),
            "step 1, after its writes: byte 0 of `conv` holds `relu`"
        );
        // Two live buffers on the same bytes.
        let mut clash = good;
        clash.offsets[1] = clash.offsets[0];
        assert!(simulate(&input, &clash).unwrap_err().contains("holds `x`"));
    }

    #[test]
    fn a_concat_does_not_copy_its_slices_and_they_must_be_intact() {
        let input = super::super::testutil::concat_example(256);
        let good = plan(&input).unwrap();
        assert_eq!(good.slice_count(), 2);
        simulate(&input, &good).unwrap();
        // c read after the Concat finds the Concat's output.
        let mut late = input.clone();
        late.buffers[0].uses.push(4);
        assert_eq!(
            simulate(&late, &good).unwrap_err(),
            "step 4, before its writes: byte 0 of `c` holds `P`"
        );
        // Without the record, the Concat's write clobbers c while it copies it.
        let mut unrecorded = good.clone();
        unrecorded.slice_of = vec![None; 5];
        assert_eq!(
            simulate(&input, &unrecorded).unwrap_err(),
            "step 3, after its writes: byte 0 of `c` holds `P`"
        );
        // t on d's bytes: d, written after t, holds its tag, but t is read at step 2
        // after d's write.
        let mut clash = good.clone();
        clash.offsets[1] = clash.offsets[2];
        assert!(simulate(&input, &clash).unwrap_err().contains("holds `d`"));
        // A slice not where its record says.
        let mut moved = good;
        moved.offsets[2] += 256;
        moved.arena_bytes += 256;
        assert!(
            simulate(&input, &moved)
                .unwrap_err()
                .contains("is not at byte 256")
        );
    }

    #[test]
    fn an_overlapped_step_writes_plane_by_plane_over_planes_already_read() {
        let input = super::super::testutil::pool_example(512, 4096);
        let good = plan(&input).unwrap();
        assert_eq!(good.overlap(BufferId(2)), Some((BufferId(1), -256)));
        simulate(&input, &good).unwrap();
        // One alignment step closer: output plane 0 lands on input plane 0.
        let mut closer = good.clone();
        closer.offsets[2] += 64;
        closer.overlap_of[2] = Some((BufferId(1), -192));
        assert_eq!(
            simulate(&input, &closer).unwrap_err(),
            "step 2, plane 0: byte 0 of `conv` holds `pool`"
        );
        // The conv read again after the pool finds the pool's planes.
        let mut late = input.clone();
        late.buffers[1].uses.push(3);
        assert!(
            simulate(&late, &good)
                .unwrap_err()
                .contains("of `conv` holds `pool`")
        );
    }

    /// Every zoo model in `testdata/` (generated by `scripts/make_testdata.py`): the
    /// plan Kiln compiles with passes the validator and the simulation.
    #[test]
    fn zoo_plans_simulate_cleanly() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata");
        let Ok(dir) = std::fs::read_dir(&root) else {
            eprintln!("no testdata/: zoo simulation skipped");
            return;
        };
        let mut models: Vec<_> = dir
            .flatten()
            .map(|e| e.path().join("random.onnx"))
            .filter(|p| p.is_file())
            .collect();
        models.sort();
        for model in models {
            let compiled = crate::compile(&model, &crate::Options::default())
                .unwrap_or_else(|e| panic!("{}: {e}", model.display()));
            let (input, p) = (&compiled.plan_input, &compiled.plan);
            validate(input, p).unwrap();
            simulate(input, p).unwrap_or_else(|e| panic!("{}: {e}", model.display()));
            eprintln!(
                "{:<40} arena / bound {:.3}, {} in place",
                model.display(),
                p.arena_bytes as f64 / p.lower_bound_bytes as f64,
                p.in_place_count()
            );
        }
    }
}
