//! Pass 4: an independent checker for any [`MemoryPlan`] against its input
//! (regalloc2's `checker.rs` in spirit).
//!
//! It shares no code with the planner beyond the data types: lifetimes, aligned
//! sizes and totals are recomputed here from the [`PlanInput`] by their
//! definitions, and the no-overlap property is checked by a sweep over time, so
//! a bug in liveness or in a strategy cannot hide itself. O(n log n).

use std::collections::BTreeMap;
use std::ops::Bound;

use super::{BufferRequest, Lifetime, MemoryPlan, PlanError, PlanInput};

/// Checks that `plan` is a correct plan for `input`:
///
/// - the plan has one offset, lifetime and aligned size per buffer, and they are
///   the ones the input defines;
/// - every offset is a multiple of the alignment, every buffer ends inside the
///   arena, and `arena_bytes` is exactly the largest end;
/// - `naive_bytes` and `lower_bound_bytes` are the input's;
/// - every recorded alias is legal, judged from the definitions: the buffer's step may
///   overwrite that input ([`BufferRequest::in_place_of`](super::BufferRequest)), the
///   input is neither scratch nor a graph output, has the same size, is written
///   earlier and last read at that step, is overwritten by no other buffer, and sits
///   at the same offset; `in_place_lower_bound_bytes` is the bound with these aliases;
/// - no two buffers with intersecting lifetimes share a byte, except a buffer and the
///   input it is written over, which share exactly their bytes at that one step.
pub fn validate(input: &PlanInput, plan: &MemoryPlan) -> Result<(), PlanError> {
    let alignment = input.alignment;
    if alignment == 0 || alignment & (alignment - 1) != 0 {
        return Err(PlanError::BadAlignment { alignment });
    }
    if plan.alignment != alignment {
        return Err(PlanError::AlignmentMismatch {
            expected: alignment,
            found: plan.alignment,
        });
    }
    let n = input.buffers.len();
    for (what, found) in [
        ("offsets", plan.offsets.len()),
        ("lifetimes", plan.lifetimes.len()),
        ("aligned sizes", plan.aligned_sizes.len()),
        ("aliases", plan.alias_of.len()),
        ("slices", plan.slice_of.len()),
        ("overlaps", plan.overlap_of.len()),
    ] {
        if found != n {
            return Err(PlanError::PlanShape {
                what,
                expected: n,
                found,
            });
        }
    }

    // Per buffer: recompute, compare, and check placement against the arena.
    let mut sizes = Vec::with_capacity(n);
    let mut lifetimes = Vec::with_capacity(n);
    let mut naive = 0usize;
    let mut max_end = 0usize;
    for (i, buffer) in input.buffers.iter().enumerate() {
        let life = expected_lifetime(input, i)?;
        let size = buffer
            .size
            .div_ceil(alignment)
            .checked_mul(alignment)
            .ok_or_else(|| PlanError::Overflow {
                what: format!("size of buffer `{}` rounded up to {alignment}", buffer.name),
            })?;
        if plan.lifetimes[i] != life {
            return Err(mismatch(input, i, "lifetime", life, plan.lifetimes[i]));
        }
        if plan.aligned_sizes[i] != size {
            return Err(mismatch(
                input,
                i,
                "aligned size",
                size,
                plan.aligned_sizes[i],
            ));
        }
        naive = naive.checked_add(size).ok_or_else(|| PlanError::Overflow {
            what: "total size of all buffers".to_string(),
        })?;
        let offset = plan.offsets[i];
        if !offset.is_multiple_of(alignment) {
            return Err(PlanError::Misaligned {
                buffer: buffer.name.clone(),
                offset,
                alignment,
            });
        }
        // Zero-size buffers too must not point past the arena: code slicing
        // `arena[offset..offset]` would panic.
        match offset.checked_add(size) {
            Some(end) if end <= plan.arena_bytes => {
                if size > 0 {
                    max_end = max_end.max(end);
                }
            }
            end => {
                return Err(PlanError::OutOfArena {
                    buffer: buffer.name.clone(),
                    offset,
                    end: end.unwrap_or(usize::MAX),
                    arena_bytes: plan.arena_bytes,
                });
            }
        }
        sizes.push(size);
        lifetimes.push(life);
    }
    // Aliases and overlaps first: of all the ways a plan can be wrong, they corrupt data.
    let mut occupied = check_aliases(input, plan, &lifetimes)?;
    let swept = check_slices(input, plan, &lifetimes, &sizes, &mut occupied)?;
    let entries = sweep_entries(input, plan, &occupied, &swept)?;
    check_no_overlap(input, &entries, &lifetimes)?;
    check_total("arena_bytes", plan.arena_bytes, max_end)?;
    check_total("naive_bytes", plan.naive_bytes, naive)?;
    let peak = peak_live_bytes(&lifetimes, &sizes);
    check_total("lower_bound_bytes", plan.lower_bound_bytes, peak)?;
    let (entry_lives, entry_sizes): (Vec<Lifetime>, Vec<usize>) =
        entries.iter().map(|e| (e.life, e.bytes.len())).unzip();
    let in_place_peak = peak_live_bytes(&entry_lives, &entry_sizes);
    check_total(
        "in_place_lower_bound_bytes",
        plan.in_place_lower_bound_bytes,
        in_place_peak,
    )
}

/// Re-checks every alias of `plan` against the definitions, and returns the steps
/// each buffer occupies its bytes alone: its lifetime, except that an input written
/// over in place hands its bytes to the output at the step that writes it, so its
/// occupancy ends one step earlier. (Anything else on those bytes at that step
/// overlaps the output, which sits at the same offset with the same size.)
fn check_aliases(
    input: &PlanInput,
    plan: &MemoryPlan,
    lifetimes: &[Lifetime],
) -> Result<Vec<Lifetime>, PlanError> {
    let mut occupied = lifetimes.to_vec();
    let mut taken = vec![false; input.buffers.len()];
    // (output, input, the overlap's distance or None for an in-place alias)
    let in_place = plan.alias_of.iter().enumerate();
    let in_place = in_place.filter_map(|(y, a)| a.map(|x| (y, x, None)));
    let overlaps = plan.overlap_of.iter().enumerate();
    let overlaps = overlaps.filter_map(|(y, o)| o.map(|(x, d)| (y, x, Some(d))));
    for (y, id, overlap) in in_place.chain(overlaps) {
        let out = &input.buffers[y];
        let bad = |input: String, reason: String| {
            let buffer = out.name.clone();
            match overlap {
                None => PlanError::BadAlias {
                    buffer,
                    input,
                    reason,
                },
                Some(_) => PlanError::BadOverlap {
                    buffer,
                    input,
                    reason,
                },
            }
        };
        let Some(inp) = input.buffers.get(id.index()) else {
            return Err(bad(id.to_string(), "does not exist".into()));
        };
        let x = id.index();
        let life = lifetimes[x];
        // The request must name the input; then the rules both kinds share, then each
        // kind's own.
        let named = match overlap {
            None => out.in_place_of.contains(&id),
            Some(_) => out.overlap_of.is_some_and(|(named, _)| named == id),
        };
        let reason = if x == y {
            Some("is the buffer itself".to_string())
        } else if !named && overlap.is_none() {
            Some("is not an input its step may overwrite".into())
        } else if !named {
            Some("is not an input its step reads by planes".into())
        } else if out.scratch || inp.scratch {
            Some("is kernel scratch, or is written over by it".into())
        } else if inp.live_to_end {
            Some("is a graph output".into())
        } else if life.first >= out.def || life.last != out.def {
            Some(format!(
                "lives over steps {life}, not up to step {} that writes it",
                out.def
            ))
        } else if taken[x] {
            Some("another buffer is also written over".into())
        } else {
            match overlap {
                None => in_place_reason(plan, out, inp, (x, y)),
                Some(delta) => overlap_reason(plan, out, inp, (x, y), delta),
            }
        };
        if let Some(reason) = reason {
            return Err(bad(inp.name.clone(), reason));
        }
        taken[x] = true;
        // first < def == last, so this stays a non-empty range.
        occupied[x].last -= 1;
    }
    Ok(occupied)
}

/// Why `out` may not be written in place over `inp`, if it may not.
fn in_place_reason(
    plan: &MemoryPlan,
    out: &BufferRequest,
    inp: &BufferRequest,
    (x, y): (usize, usize),
) -> Option<String> {
    if inp.size != out.size {
        Some(format!("holds {} bytes, not {}", inp.size, out.size))
    } else if plan.offsets[x] != plan.offsets[y] {
        Some(format!(
            "sits at offset {}, not {}",
            plan.offsets[x], plan.offsets[y]
        ))
    } else {
        None
    }
}

/// Why `out` may not start `delta` bytes from `inp`, if it may not: the sizes must split
/// into the kernel's planes, and at that distance no output plane may land on an
/// input plane not yet read.
fn overlap_reason(
    plan: &MemoryPlan,
    out: &BufferRequest,
    inp: &BufferRequest,
    (x, y): (usize, usize),
    delta: isize,
) -> Option<String> {
    let distance = plan.offsets[y] as i128 - plan.offsets[x] as i128;
    let Some((_, order)) = out.overlap_of else {
        return Some("is not an input its step reads by planes".into());
    };
    if plan.alias_of[y].is_some() {
        Some("is also written in place over a buffer".into())
    } else if order.planes.checked_mul(order.in_plane) != Some(inp.size)
        || order.planes.checked_mul(order.out_plane) != Some(out.size)
    {
        Some(format!(
            "does not split into {} planes of {} and {} bytes",
            order.planes, order.in_plane, order.out_plane
        ))
    } else if distance != delta as i128 {
        Some(format!("sits {distance} bytes from it, not {delta}"))
    } else if !order.is_safe(delta) {
        Some(format!(
            "at {delta} bytes, an output plane lands on an input plane not yet read"
        ))
    } else {
        None
    }
}

/// Bytes a buffer holds alone over some steps, for the overlap sweep.
struct Entry {
    buffer: usize,
    life: Lifetime,
    bytes: std::ops::Range<usize>,
}

/// What each buffer holds in the overlap sweep, over the steps it holds it alone
/// (`occupied`). A slice holds nothing (its parent holds its bytes). A chain of
/// in-place aliases with a segment overlap (at most one per chain) holds its whole
/// extent up to the overlap's step, the output included at that step (the kernel
/// reads the input there while it writes the output), and only the output's own bytes
/// after it: so a third buffer on the input's bytes at the overlap's step overlaps,
/// and the in-place bound is the planner's (its overlapped blocks are cut the same
/// way). Anything else holds its own bytes.
fn sweep_entries(
    input: &PlanInput,
    plan: &MemoryPlan,
    occupied: &[Lifetime],
    swept: &[usize],
) -> Result<Vec<Entry>, PlanError> {
    let n = swept.len();
    let mut root: Vec<usize> = (0..n).collect();
    fn find(root: &mut [usize], mut i: usize) -> usize {
        while root[i] != i {
            root[i] = root[root[i]];
            i = root[i];
        }
        i
    }
    let aliases = plan.alias_of.iter().map(|a| a.map(|x| x.index()));
    let overlaps = plan.overlap_of.iter().map(|o| o.map(|(x, _)| x.index()));
    for (y, x) in aliases.enumerate().chain(overlaps.enumerate()) {
        if let Some(x) = x {
            let (a, b) = (find(&mut root, x), find(&mut root, y));
            root[b] = a;
        }
    }
    // Per chain: its overlap's output, and the extent of its members.
    let mut overlap_in: Vec<Option<usize>> = vec![None; n];
    for (y, o) in plan.overlap_of.iter().enumerate() {
        if let Some((x, _)) = o {
            let r = find(&mut root, y);
            if overlap_in[r].replace(y).is_some() {
                return Err(PlanError::BadOverlap {
                    buffer: input.buffers[y].name.clone(),
                    input: input.buffers[x.index()].name.clone(),
                    reason: "is in a chain with another overlap".into(),
                });
            }
        }
    }
    let own = |i: usize| plan.offsets[i]..plan.offsets[i] + swept[i];
    let mut extent: Vec<Option<std::ops::Range<usize>>> = vec![None; n];
    for i in (0..n).filter(|&i| swept[i] > 0) {
        let r = find(&mut root, i);
        let e = own(i);
        extent[r] = Some(match extent[r].take() {
            None => e,
            Some(x) => x.start.min(e.start)..x.end.max(e.end),
        });
    }
    let mut entries = Vec::with_capacity(n + 1);
    for i in (0..n).filter(|&i| swept[i] > 0) {
        let r = find(&mut root, i);
        let entry = |life: Lifetime, bytes| Entry {
            buffer: i,
            life,
            bytes,
        };
        let (Some(y), Some(ext)) = (overlap_in[r], extent[r].clone()) else {
            entries.push(entry(occupied[i], own(i)));
            continue;
        };
        let at = input.buffers[y].def;
        let life = occupied[i];
        if i == y {
            entries.push(entry(Lifetime::new(at, at), ext));
            if life.last > at {
                entries.push(entry(Lifetime::new(at + 1, life.last), own(i)));
            }
        } else if life.last < at {
            entries.push(entry(life, ext));
        } else {
            entries.push(entry(life, own(i)));
        }
    }
    Ok(entries)
}

/// Re-checks every Concat slice of `plan` against the definitions: the request names
/// that parent and offset ([`BufferRequest::slice_of`](super::BufferRequest)); the
/// slice is neither scratch nor a graph output, in no in-place alias, parents no slice
/// and is no slice's parent's parent; it is written before its parent's step, read
/// once there and never after; its offset in the parent is aligned, it lies inside the
/// parent at exactly that offset and apart from the parent's other slices. Then the
/// parent occupies its bytes from its earliest slice's first step (`occupied`), and
/// the slices, inside it, leave the overlap sweep: the sizes returned are the sweep's
/// (0 for a slice).
fn check_slices(
    input: &PlanInput,
    plan: &MemoryPlan,
    lifetimes: &[Lifetime],
    sizes: &[usize],
    occupied: &mut [Lifetime],
) -> Result<Vec<usize>, PlanError> {
    let n = input.buffers.len();
    let mut swept = sizes.to_vec();
    let mut overwritten = vec![false; n];
    let overlapped = plan.overlap_of.iter().flatten().map(|(x, _)| x);
    for x in plan.alias_of.iter().flatten().chain(overlapped) {
        if let Some(slot) = overwritten.get_mut(x.index()) {
            *slot = true;
        }
    }
    let mut by_parent: Vec<(usize, usize, usize)> = Vec::new(); // (parent, delta, slice)
    for (c, slice) in plan.slice_of.iter().enumerate() {
        let Some((id, delta)) = *slice else { continue };
        let child = &input.buffers[c];
        let bad = |parent: String, reason: String| PlanError::BadSlice {
            buffer: child.name.clone(),
            parent,
            reason,
        };
        let Some(parent) = input.buffers.get(id.index()) else {
            return Err(bad(id.to_string(), "it does not exist".into()));
        };
        let p = id.index();
        let life = lifetimes[c];
        let end = delta.checked_add(sizes[c]);
        let reason = if p == c {
            Some("it is the buffer itself".to_string())
        } else if child.slice_of != Some((id, delta)) {
            Some(format!("its request does not name it at byte {delta}"))
        } else if child.scratch || parent.scratch {
            Some("one of them is kernel scratch".into())
        } else if child.live_to_end {
            Some("it is a graph output".into())
        } else if plan.alias_of[c].is_some() || plan.overlap_of[c].is_some() || overwritten[c] {
            Some("it is in an in-place alias or overlap".into())
        } else if plan.alias_of[p].is_some() {
            Some("the parent is written in place over another buffer".into())
        } else if plan.slice_of[p].is_some()
            || plan.slice_of.iter().flatten().any(|s| s.0.index() == c)
        {
            Some("slices of slices are not kept".into())
        } else if life.first >= parent.def || life.last != parent.def {
            Some(format!(
                "it lives over steps {life}, not up to step {} that writes the parent",
                parent.def
            ))
        } else if child.uses.iter().filter(|&&u| u == parent.def).count() != 1 {
            Some("the parent's step reads it more than once".into())
        } else if !delta.is_multiple_of(input.alignment) {
            Some(format!(
                "byte {delta} is not a multiple of the alignment {}",
                input.alignment
            ))
        } else if end.is_none_or(|end| end > sizes[p]) {
            Some(format!(
                "it does not fit at byte {delta} of {} bytes",
                sizes[p]
            ))
        } else if plan.offsets[p].checked_add(delta) != Some(plan.offsets[c]) {
            Some(format!(
                "it sits at offset {}, not the parent's {} + {delta}",
                plan.offsets[c], plan.offsets[p]
            ))
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(bad(parent.name.clone(), reason));
        }
        by_parent.push((p, delta, c));
        occupied[p].first = occupied[p].first.min(life.first);
        swept[c] = 0;
    }
    by_parent.sort_unstable();
    for w in by_parent.windows(2) {
        let ((p, d0, c0), (q, d1, c1)) = (w[0], w[1]);
        if p == q && d0 + sizes[c0] > d1 {
            return Err(PlanError::BadSlice {
                buffer: input.buffers[c1].name.clone(),
                parent: input.buffers[p].name.clone(),
                reason: format!("it overlaps the slice `{}`", input.buffers[c0].name),
            });
        }
    }
    Ok(swept)
}

/// The lifetime buffer `i` must have, by definition.
fn expected_lifetime(input: &PlanInput, i: usize) -> Result<Lifetime, PlanError> {
    let b = &input.buffers[i];
    let name = || b.name.clone();
    if b.def >= input.steps {
        return Err(PlanError::DefOutOfRange {
            buffer: name(),
            def: b.def,
            steps: input.steps,
        });
    }
    if let Some(&step) = b.uses.iter().find(|&&u| u >= input.steps) {
        return Err(PlanError::UseOutOfRange {
            buffer: name(),
            step,
            steps: input.steps,
        });
    }
    if let Some(&step) = b.uses.iter().find(|&&u| u < b.def) {
        return Err(PlanError::UseBeforeDef {
            buffer: name(),
            step,
            def: b.def,
        });
    }
    let last_use = b.uses.iter().copied().max().unwrap_or(b.def).max(b.def);
    if b.scratch {
        if b.live_to_end {
            return Err(PlanError::ScratchLiveToEnd { buffer: name() });
        }
        if last_use != b.def {
            return Err(PlanError::ScratchUsedLater {
                buffer: name(),
                def: b.def,
                step: last_use,
            });
        }
    }
    let last = if b.live_to_end {
        input.steps - 1
    } else {
        last_use
    };
    Ok(Lifetime::new(b.def, last))
}

fn mismatch(
    input: &PlanInput,
    i: usize,
    what: &'static str,
    expected: impl ToString,
    found: impl ToString,
) -> PlanError {
    PlanError::Mismatch {
        buffer: input.buffers[i].name.clone(),
        what,
        expected: expected.to_string(),
        found: found.to_string(),
    }
}

fn check_total(what: &'static str, claimed: usize, actual: usize) -> Result<(), PlanError> {
    if claimed == actual {
        Ok(())
    } else {
        Err(PlanError::TotalMismatch {
            what,
            claimed,
            actual,
        })
    }
}

/// max over steps of live bytes, from +size/−size events sorted by time (a
/// buffer dying at `last` frees its bytes at `last + 1`).
fn peak_live_bytes(lifetimes: &[Lifetime], sizes: &[usize]) -> usize {
    // (time, is_birth, size): at equal times deaths (false) sort before births.
    let mut events: Vec<(usize, bool, usize)> = Vec::with_capacity(2 * lifetimes.len());
    for (life, &size) in lifetimes.iter().zip(sizes) {
        if size > 0 {
            events.push((life.first, true, size));
            // last + 1 may not exist when last == usize::MAX; then it never dies.
            if let Some(t) = life.last.checked_add(1) {
                events.push((t, false, size));
            }
        }
    }
    events.sort_unstable();
    let (mut live, mut peak) = (0usize, 0usize);
    for (_, birth, size) in events {
        if birth {
            live = live.saturating_add(size);
            peak = peak.max(live);
        } else {
            live = live.saturating_sub(size);
        }
    }
    peak
}

/// Sweep over time in order of first step, keeping the byte ranges of the live
/// entries in a map keyed by offset. Live ranges are pairwise disjoint (else we
/// have already failed), so a new range can only hit its predecessor or its
/// successor in the map. Errors name the buffers and their `shown` lifetimes.
fn check_no_overlap(
    input: &PlanInput,
    entries: &[Entry],
    shown: &[Lifetime],
) -> Result<(), PlanError> {
    let planned: Vec<usize> = (0..entries.len())
        .filter(|&e| !entries[e].bytes.is_empty())
        .collect();
    let mut by_first = planned.clone();
    by_first.sort_unstable_by_key(|&e| (entries[e].life.first, e));
    let mut by_last = planned;
    by_last.sort_unstable_by_key(|&e| (entries[e].life.last, e));

    let (start, end) = (
        |e: usize| entries[e].bytes.start,
        |e: usize| entries[e].bytes.end,
    );
    let mut live: BTreeMap<usize, usize> = BTreeMap::new(); // offset -> entry
    let mut dead = by_last.iter().peekable();
    for &e in &by_first {
        let now = entries[e].life.first;
        while let Some(&&f) = dead.peek() {
            if entries[f].life.last >= now {
                break;
            }
            if live.get(&start(f)) == Some(&f) {
                live.remove(&start(f));
            }
            dead.next();
        }
        let offset = start(e);
        let below = live.range(..=offset).next_back();
        let above = live
            .range((Bound::Excluded(offset), Bound::Unbounded))
            .next();
        for (&other_offset, &f) in below.into_iter().chain(above) {
            if other_offset < end(e) && offset < end(f) {
                let (a, b) = if entries[e].buffer <= entries[f].buffer {
                    (e, f)
                } else {
                    (f, e)
                };
                let (ba, bb) = (entries[a].buffer, entries[b].buffer);
                return Err(PlanError::Overlap {
                    a: input.buffers[ba].name.clone(),
                    a_life: shown[ba],
                    a_offset: start(a),
                    a_end: end(a),
                    b: input.buffers[bb].name.clone(),
                    b_life: shown[bb],
                    b_offset: start(b),
                    b_end: end(b),
                });
            }
        }
        live.insert(offset, e);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testutil::seed_003_example;
    use super::super::{BufferId, BufferRequest, PlanInput, analyze, plan};
    use super::*;

    const KB: usize = 1024;

    #[test]
    fn accepts_the_planners_result() {
        let input = seed_003_example();
        validate(&input, &plan(&input).unwrap()).unwrap();
    }

    #[test]
    fn rejects_an_overlap_and_names_both_buffers() {
        let input = seed_003_example();
        let mut bad = plan(&input).unwrap();
        bad.offsets[1] = 64 * KB; // T2 onto T1, both live at steps 2..=9
        let err = validate(&input, &bad).unwrap_err();
        assert_eq!(
            err,
            PlanError::Overlap {
                a: "T1".into(),
                a_life: Lifetime::new(0, 9),
                a_offset: 0,
                a_end: 100 * KB,
                b: "T2".into(),
                b_life: Lifetime::new(2, 11),
                b_offset: 64 * KB,
                b_end: 114 * KB,
            }
        );
        assert_eq!(
            err.to_string(),
            "invalid memory plan: buffers `T1` (steps 0..=9, bytes 0..102400) and `T2` \
             (steps 2..=11, bytes 65536..116736) are live at the same time and share bytes"
        );
    }

    #[test]
    fn rejects_equal_offsets_of_conflicting_buffers_but_not_of_disjoint_ones() {
        let input = seed_003_example();
        let mut bad = plan(&input).unwrap();
        bad.offsets[2] = 0; // T3 onto T1
        assert!(matches!(
            validate(&input, &bad),
            Err(PlanError::Overlap { .. })
        ));
        // T4 and T1 share offset 0 legitimately: T1 is dead by step 10.
        let good = plan(&input).unwrap();
        assert_eq!(good.offsets[0], good.offsets[3]);
    }

    #[test]
    fn rejects_misalignment() {
        let input = seed_003_example();
        let mut bad = plan(&input).unwrap();
        bad.offsets[3] = 128;
        assert!(matches!(
            validate(&input, &bad),
            Err(PlanError::Misaligned { offset: 128, .. })
        ));
    }

    #[test]
    fn rejects_a_buffer_outside_the_arena() {
        let input = seed_003_example();
        let mut bad = plan(&input).unwrap();
        bad.offsets[1] = 230 * KB;
        assert!(matches!(
            validate(&input, &bad),
            Err(PlanError::OutOfArena { .. })
        ));
        bad.offsets[1] = usize::MAX - 255;
        assert!(matches!(
            validate(&input, &bad),
            Err(PlanError::OutOfArena { .. })
        ));
    }

    #[test]
    fn rejects_wrong_totals_and_shapes() {
        let input = seed_003_example();
        let good = plan(&input).unwrap();

        let mut bad = good.clone();
        bad.arena_bytes += 256; // room to spare is still a lie
        assert!(matches!(
            validate(&input, &bad),
            Err(PlanError::TotalMismatch {
                what: "arena_bytes",
                ..
            })
        ));
        let mut bad = good.clone();
        bad.lower_bound_bytes -= 256;
        assert!(matches!(
            validate(&input, &bad),
            Err(PlanError::TotalMismatch {
                what: "lower_bound_bytes",
                ..
            })
        ));
        let mut bad = good.clone();
        bad.naive_bytes = 0;
        assert!(matches!(
            validate(&input, &bad),
            Err(PlanError::TotalMismatch {
                what: "naive_bytes",
                ..
            })
        ));
        let mut bad = good.clone();
        bad.offsets.pop();
        assert!(matches!(
            validate(&input, &bad),
            Err(PlanError::PlanShape {
                what: "offsets",
                ..
            })
        ));
        let mut bad = good.clone();
        bad.lifetimes[3] = Lifetime::new(11, 14); // would hide T4's clash with T2
        bad.offsets[3] = bad.offsets[1];
        assert!(matches!(
            validate(&input, &bad),
            Err(PlanError::Mismatch {
                what: "lifetime",
                ..
            })
        ));
        let mut bad = good.clone();
        bad.aligned_sizes[0] = 1;
        assert!(matches!(
            validate(&input, &bad),
            Err(PlanError::Mismatch {
                what: "aligned size",
                ..
            })
        ));
        let mut bad = good;
        bad.alignment = 512;
        assert!(matches!(
            validate(&input, &bad),
            Err(PlanError::AlignmentMismatch { .. })
        ));
    }

    #[test]
    fn rejects_bad_inputs_without_panicking() {
        let good_input = seed_003_example();
        let good = plan(&good_input).unwrap();
        let mut input = good_input.clone();
        input.buffers[0].def = 99;
        assert!(matches!(
            validate(&input, &good),
            Err(PlanError::DefOutOfRange { .. })
        ));
        let mut input = good_input.clone();
        input.alignment = 0;
        assert!(matches!(
            validate(&input, &good),
            Err(PlanError::BadAlignment { .. })
        ));
        let mut input = good_input;
        input
            .buffers
            .push(BufferRequest::new("extra", 1, 0, vec![]));
        assert!(matches!(
            validate(&input, &good),
            Err(PlanError::PlanShape { .. })
        ));
    }

    use super::super::testutil::in_place_chain as chain;

    fn reason(result: Result<(), PlanError>) -> String {
        match result {
            Err(PlanError::BadAlias { reason, .. }) => reason,
            other => panic!("expected a rejected alias, got {other:?}"),
        }
    }

    #[test]
    fn accepts_in_place_aliases_sharing_bytes() {
        let input = chain();
        let p = plan(&input).unwrap();
        assert_eq!(
            p.alias_of,
            vec![None, None, Some(BufferId(0)), Some(BufferId(2))]
        );
        assert_eq!(p.offsets[0], p.offsets[2]);
        assert_eq!(p.offsets[2], p.offsets[3]);
        assert_eq!(p.in_place_lower_bound_bytes, 2048);
        assert_eq!(p.lower_bound_bytes, 3072);
        validate(&input, &p).unwrap();
        // Without the record, the shared bytes are an overlap.
        let mut bad = p.clone();
        bad.alias_of = vec![None; 4];
        bad.in_place_lower_bound_bytes = bad.lower_bound_bytes;
        assert!(matches!(
            validate(&input, &bad),
            Err(PlanError::Overlap { .. })
        ));
    }

    #[test]
    fn rejects_an_alias_over_an_input_read_later() {
        let mut input = chain();
        let mut p = plan(&input).unwrap();
        // conv is now read again at step 3, after bn overwrote it (the plan's lifetimes
        // follow, so that only the alias is wrong).
        input.buffers[0].uses.push(3);
        p.lifetimes = analyze(&input).unwrap().lifetimes;
        assert_eq!(
            reason(validate(&input, &p)).as_str(),
            "lives over steps 0..=3, not up to step 1 that writes it"
        );
    }

    #[test]
    fn rejects_illegal_aliases() {
        let input = chain();
        let good = plan(&input).unwrap();
        let with_input = |f: &dyn Fn(&mut PlanInput)| {
            let mut input = chain();
            f(&mut input);
            let mut p = good.clone();
            let live = analyze(&input).unwrap();
            (p.lifetimes, p.aligned_sizes) = (live.lifetimes, live.sizes);
            reason(validate(&input, &p))
        };
        assert!(with_input(&|i| i.buffers[0].live_to_end = true).contains("graph output"));
        assert!(with_input(&|i| i.buffers[2].in_place_of.clear()).contains("may overwrite"));
        assert!(with_input(&|i| i.buffers[2].size = 1000).contains("holds 1024 bytes"));
        let scratch = with_input(&|i| {
            i.buffers[3].scratch = true;
            i.buffers[3].live_to_end = false;
            i.buffers[3].uses.clear();
        });
        assert!(scratch.contains("scratch"));

        let with_plan = |f: &dyn Fn(&mut MemoryPlan)| {
            let mut p = good.clone();
            f(&mut p);
            validate(&input, &p)
        };
        // Apart: the kernel would read bytes that are not its input.
        let moved = with_plan(&|p| {
            p.offsets[3] = 2048;
            p.arena_bytes = 3072;
        });
        assert!(reason(moved).contains("sits at offset"));
        // Two outputs over one input.
        let twice = with_plan(&|p| p.alias_of[3] = Some(BufferId(0)));
        assert!(reason(twice).contains("may overwrite"));
        // Over itself, over nothing, over a buffer it may not overwrite.
        assert!(reason(with_plan(&|p| p.alias_of[2] = Some(BufferId(2)))).contains("itself"));
        assert!(reason(with_plan(&|p| p.alias_of[2] = Some(BufferId(9)))).contains("exist"));
        assert!(
            reason(with_plan(&|p| p.alias_of[1] = Some(BufferId(0)))).contains("may overwrite")
        );
        // The bound with aliases must be the true one.
        assert!(matches!(
            with_plan(&|p| p.in_place_lower_bound_bytes = 3072),
            Err(PlanError::TotalMismatch {
                what: "in_place_lower_bound_bytes",
                ..
            })
        ));
        assert!(matches!(
            with_plan(&|p| {
                p.alias_of.pop();
            }),
            Err(PlanError::PlanShape {
                what: "aliases",
                ..
            })
        ));
    }

    #[test]
    fn a_third_buffer_on_the_shared_bytes_is_an_overlap() {
        let input = chain();
        let mut p = plan(&input).unwrap();
        // x onto the chain's bytes: it overlaps conv and bn while they are live.
        p.offsets[1] = p.offsets[0];
        p.arena_bytes = 1024;
        assert!(matches!(
            validate(&input, &p),
            Err(PlanError::Overlap { .. })
        ));
    }

    #[test]
    fn zero_size_buffers_may_sit_anywhere_inside_the_arena() {
        let mut input = PlanInput::new(1);
        input.push(BufferRequest::new("a", 256, 0, vec![]));
        input.push(BufferRequest::new("empty", 0, 0, vec![]));
        let mut p = plan(&input).unwrap();
        assert_eq!(p.offsets, vec![0, 0]);
        p.offsets[1] = 256; // on a live buffer's end: shares no byte
        validate(&input, &p).unwrap();
        p.offsets[1] = 512;
        assert!(matches!(
            validate(&input, &p),
            Err(PlanError::OutOfArena { .. })
        ));
    }

    fn slice_reason(result: Result<(), PlanError>) -> String {
        match result {
            Err(PlanError::BadSlice { reason, .. }) => reason,
            other => panic!("expected a rejected slice, got {other:?}"),
        }
    }

    #[test]
    fn accepts_concat_slices_inside_their_parent() {
        use super::super::testutil::concat_example;
        let input = concat_example(256);
        let p = plan(&input).unwrap();
        assert_eq!(p.slice_count(), 2);
        assert_eq!(p.slice(BufferId(2)), Some((BufferId(3), 256)));
        assert_eq!(p.offsets[0], p.offsets[3]);
        assert_eq!(p.offsets[2], p.offsets[3] + 256);
        assert_eq!((p.in_place_lower_bound_bytes, p.arena_bytes), (1024, 1024));
        validate(&input, &p).unwrap();
        // Without the record, the shared bytes are an overlap.
        let mut bad = p.clone();
        bad.slice_of = vec![None; 5];
        bad.in_place_lower_bound_bytes = bad.lower_bound_bytes;
        assert!(matches!(
            validate(&input, &bad),
            Err(PlanError::Overlap { .. })
        ));
    }

    #[test]
    fn rejects_illegal_slices() {
        use super::super::testutil::concat_example;
        let good_input = concat_example(256);
        let good = plan(&good_input).unwrap();
        // c is read after the Concat, which the plan's lifetimes follow: the read would
        // find the Concat's output.
        let mut input = good_input.clone();
        input.buffers[0].uses.push(4);
        let mut p = good.clone();
        p.lifetimes = analyze(&input).unwrap().lifetimes;
        assert_eq!(
            slice_reason(validate(&input, &p)),
            "it lives over steps 0..=4, not up to step 3 that writes the parent"
        );
        // A misaligned offset, in the request and the plan alike.
        let mut input = good_input.clone();
        input.buffers[2].slice_of = Some((BufferId(3), 128));
        let mut p = good.clone();
        p.slice_of[2] = Some((BufferId(3), 128));
        p.offsets[2] = p.offsets[3] + 128;
        assert_eq!(p.offsets[3], 0);
        // (The parent's offset is aligned, so the slice's is not: caught as such.)
        assert!(matches!(
            validate(&input, &p),
            Err(PlanError::Misaligned { offset: 128, .. })
        ));
        // A slice the request does not name at that byte.
        let mut p = good.clone();
        p.slice_of[2] = Some((BufferId(3), 512));
        assert!(slice_reason(validate(&good_input, &p)).contains("does not name it"));
        // Not at the parent's offset plus its byte.
        let mut p = good.clone();
        p.offsets[2] = p.offsets[3] + 512;
        assert!(slice_reason(validate(&good_input, &p)).contains("not the parent's"));
        // Read twice by the Concat, a graph output.
        let mut input = good_input.clone();
        input.buffers[0].uses.push(3);
        assert!(slice_reason(validate(&input, &good)).contains("more than once"));
        let mut input = good_input.clone();
        input.buffers[0].live_to_end = true;
        let mut p = good.clone();
        p.lifetimes = analyze(&input).unwrap().lifetimes;
        assert!(slice_reason(validate(&input, &p)).contains("graph output"));
    }

    #[test]
    fn a_buffer_on_the_parents_other_bytes_before_it_is_written_overlaps() {
        use super::super::testutil::concat_example;
        let input = concat_example(256);
        let mut p = plan(&input).unwrap();
        // t (steps 1..=2) onto P's third part, which no slice covers: the bytes are
        // free until the Concat writes them, but the parent holds them from its first
        // slice on.
        p.offsets[1] = p.offsets[3] + 512;
        let err = validate(&input, &p).unwrap_err();
        assert!(matches!(err, PlanError::Overlap { .. }), "{err:?}");
        // Two slices of one parent on the same bytes.
        let mut input = input;
        input.buffers[2].slice_of = Some((BufferId(3), 0));
        let mut p = plan(&concat_example(256)).unwrap();
        p.slice_of[2] = Some((BufferId(3), 0));
        p.offsets[2] = p.offsets[3];
        assert!(slice_reason(validate(&input, &p)).contains("overlaps the slice"));
    }

    fn overlap_reason(result: Result<(), PlanError>) -> String {
        match result {
            Err(PlanError::BadOverlap { reason, .. }) => reason,
            other => panic!("expected BadOverlap, got {other:?}"),
        }
    }

    #[test]
    fn accepts_an_overlap_and_the_freed_bytes_after_its_step() {
        let input = super::super::testutil::pool_example(512, 4096);
        let p = plan(&input).unwrap();
        validate(&input, &p).unwrap();
        assert_eq!(p.overlap_count(), 1);
        assert_eq!(p.offsets[2] + 256, p.offsets[1]);
        // `other` (3..=4) sits on conv bytes that the pool frees at step 2.
        let conv = p.offsets[1]..p.offsets[1] + 4096;
        assert!(conv.contains(&p.offsets[3]), "{p:?}");
        assert_eq!((p.arena_bytes, p.in_place_lower_bound_bytes), (5120, 5120));
        assert_eq!(p.lower_bound_bytes, 5120);
    }

    #[test]
    fn rejects_illegal_overlaps() {
        let input = super::super::testutil::pool_example(512, 4096);
        let good = plan(&input).unwrap();
        // One alignment step closer: output plane 1 lands on input plane 1 unread.
        let mut closer = good.clone();
        closer.offsets[2] += 64;
        closer.overlap_of[2] = Some((BufferId(1), -192));
        assert!(overlap_reason(validate(&input, &closer)).contains("not yet read"));
        // The record and the offsets disagree.
        let mut moved = good.clone();
        moved.overlap_of[2] = Some((BufferId(1), -512));
        assert!(overlap_reason(validate(&input, &moved)).contains("sits -256 bytes"));
        // The request names no plane order, or another input.
        let mut no_order = input.clone();
        no_order.buffers[2].overlap_of = None;
        assert!(overlap_reason(validate(&no_order, &good)).contains("not an input"));
        // The conv is read after the pool, or is a graph output.
        let mut late = input.clone();
        late.buffers[1].uses.push(3);
        let mut p = good.clone();
        p.lifetimes[1] = Lifetime::new(1, 3);
        assert!(overlap_reason(validate(&late, &p)).contains("lives over steps"));
        // Sizes that do not split into the planes.
        let mut planes = input.clone();
        if let Some((_, order)) = &mut planes.buffers[2].overlap_of {
            order.planes = 2;
        }
        assert!(overlap_reason(validate(&planes, &good)).contains("does not split"));
    }

    #[test]
    fn a_buffer_on_the_inputs_bytes_at_the_overlaps_step_overlaps() {
        // `other` written at the pool's step, on the conv's bytes above the pool:
        // the kernel still reads them there (the pool's step holds them).
        let input = super::super::testutil::pool_example(512, 4096);
        let p = plan(&input).unwrap();
        let mut early = input.clone();
        early.buffers[3].def = 2;
        let mut bad = p.clone();
        bad.lifetimes[3] = Lifetime::new(2, 4);
        let err = validate(&early, &bad).unwrap_err();
        assert!(
            matches!(&err, PlanError::Overlap { a, a_end: 4352, b, .. } if a == "pool" && b == "other"),
            "{err:?}"
        );
    }
}
