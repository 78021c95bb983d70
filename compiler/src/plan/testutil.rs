//! Shared fixtures and brute-force oracles for the planner's tests.

use super::{BufferId, BufferRequest, Lifetime, PlanInput};

const KB: usize = 1024;

/// Seed 003's worked example: T1 100 KB [0,10), T2 50 KB [2,12), T3 80 KB [3,8),
/// T4 100 KB [10,15) (half-open in the seed, inclusive here). Naive 330 KB, planned 230 KB.
pub fn seed_003_example() -> PlanInput {
    let mut input = PlanInput::new(15);
    input.step_names = (0..15).map(|s| format!("op{s}")).collect();
    input.push(BufferRequest::new("T1", 100 * KB, 0, vec![9]));
    input.push(BufferRequest::new("T2", 50 * KB, 2, vec![11]));
    input.push(BufferRequest::new("T3", 80 * KB, 3, vec![7]));
    input.push(BufferRequest::output("T4", 100 * KB, 10));
    input
}

/// AlexNet's plan input as Kiln lowers it (sizes in bytes, steps), where both greedy
/// orders end 11.6 % above the lower bound: a hard case for the offset placers.
pub fn alexnet() -> PlanInput {
    let mut input = PlanInput::new(14);
    let tensors = [
        ("r1", 1119744, 0, 1),
        ("r2", 1119744, 1, 2),
        ("r3", 259584, 2, 3),
        ("r5", 692224, 3, 4),
        ("r6", 692224, 4, 5),
        ("r7", 147456, 5, 6),
        ("r9", 221184, 6, 7),
        ("r11", 221184, 7, 8),
        ("r13", 147456, 8, 9),
        ("r14", 36864, 9, 10),
        ("r17", 16384, 10, 11),
        ("r21", 16384, 11, 12),
    ];
    for (name, size, def, last) in tensors {
        input.push(BufferRequest::new(name, size, def, vec![last]));
    }
    for (step, size) in [
        (0, 277332),
        (3, 916800),
        (6, 1327104),
        (7, 995328),
        (8, 995328),
    ] {
        input.push(BufferRequest::scratch(
            format!("n{step}:scratch"),
            size,
            step,
        ));
    }
    input.push(BufferRequest::output("r24", 4000, 12));
    input.push(BufferRequest::output("prob_1", 4000, 13));
    input
}

/// Lifetimes straight from the definition, for cross-checks.
pub fn naive_lifetimes(input: &PlanInput) -> Vec<Lifetime> {
    input
        .buffers
        .iter()
        .map(|b| {
            if b.scratch {
                Lifetime::new(b.def, b.def)
            } else if b.live_to_end {
                Lifetime::new(b.def, input.steps - 1)
            } else {
                let last = b.uses.iter().copied().chain([b.def]).max().unwrap_or(b.def);
                Lifetime::new(b.def, last)
            }
        })
        .collect()
}

/// Aligned sizes straight from the definition.
pub fn naive_sizes(input: &PlanInput) -> Vec<usize> {
    input
        .buffers
        .iter()
        .map(|b| b.size.div_ceil(input.alignment) * input.alignment)
        .collect()
}

/// O(steps · n) lower bound.
pub fn brute_lower_bound(input: &PlanInput) -> usize {
    let lives = naive_lifetimes(input);
    let sizes = naive_sizes(input);
    (0..input.steps)
        .map(|s| {
            lives
                .iter()
                .zip(&sizes)
                .filter(|(l, _)| l.contains(s))
                .map(|(_, &z)| z)
                .sum::<usize>()
        })
        .max()
        .unwrap_or(0)
}

/// O(n²) check that no two conflicting buffers share a byte.
pub fn brute_is_valid(input: &PlanInput, offsets: &[usize]) -> bool {
    let lives = naive_lifetimes(input);
    let sizes = naive_sizes(input);
    for i in 0..offsets.len() {
        for j in i + 1..offsets.len() {
            if sizes[i] == 0 || sizes[j] == 0 || lives[i].is_disjoint(&lives[j]) {
                continue;
            }
            let (a, b) = (offsets[i], offsets[j]);
            if a < b + sizes[j] && b < a + sizes[i] {
                return false;
            }
        }
    }
    true
}

/// O(n²) check of a plan with in-place aliases, from the definitions: every alias is
/// legal (a candidate of its buffer, neither scratch nor written over a graph output,
/// equal sizes and offsets, the input written earlier and last read at the step that
/// writes the alias, no input taken twice), and two buffers whose lifetimes intersect
/// share no byte unless one is the alias of the other, or a slice of the other: a
/// slice is the one its request names, at that offset of its parent, inside it, last
/// read (once) at the step that writes the parent, written earlier, and in no alias.
pub fn brute_is_valid_aliased(
    input: &PlanInput,
    offsets: &[usize],
    alias_of: &[Option<BufferId>],
    slice_of: &[Option<(BufferId, usize)>],
    overlap_of: &[Option<(BufferId, isize)>],
) -> bool {
    let lives = naive_lifetimes(input);
    let sizes = naive_sizes(input);
    let n = offsets.len();
    let mut taken = vec![false; n];
    for (y, alias) in alias_of.iter().enumerate() {
        let Some(x) = *alias else { continue };
        let xi = x.index();
        if xi >= n || xi == y || taken[xi] {
            return false;
        }
        taken[xi] = true;
        let (bx, by) = (&input.buffers[xi], &input.buffers[y]);
        let legal = by.in_place_of.contains(&x)
            && !bx.scratch
            && !by.scratch
            && !bx.live_to_end
            && bx.size == by.size
            && offsets[xi] == offsets[y]
            && lives[xi].first < by.def
            && lives[xi].last == by.def;
        if !legal {
            return false;
        }
    }
    for (y, overlap) in overlap_of.iter().enumerate() {
        let Some((x, delta)) = *overlap else { continue };
        let xi = x.index();
        if xi >= n || xi == y || taken[xi] || alias_of[y].is_some() {
            return false;
        }
        taken[xi] = true;
        let (bx, by) = (&input.buffers[xi], &input.buffers[y]);
        let Some((named, order)) = by.overlap_of else {
            return false;
        };
        let (p, pin, pout) = (order.planes, order.in_plane, order.out_plane);
        // Output plane q must miss input planes q.. (the kernel writes plane q while
        // it reads input plane q, and reads the later ones after).
        let (ox, oy) = (offsets[xi], offsets[y]);
        let planes_safe = (0..p).all(|q| {
            (q..p).all(|r| {
                let (ys, xs) = (oy + q * pout, ox + r * pin);
                pout == 0 || pin == 0 || ys + pout <= xs || xs + pin <= ys
            })
        });
        let legal = named == x
            && !bx.scratch
            && !by.scratch
            && !bx.live_to_end
            && p * pin == bx.size
            && p * pout == by.size
            && oy as isize - ox as isize == delta
            && planes_safe
            && lives[xi].first < by.def
            && lives[xi].last == by.def;
        if !legal {
            return false;
        }
    }
    for (c, slice) in slice_of.iter().enumerate() {
        let Some((p, delta)) = *slice else { continue };
        let pi = p.index();
        if pi >= n || pi == c || taken[c] || alias_of[c].is_some() || alias_of[pi].is_some() {
            return false;
        }
        let overlapping = |i: usize| overlap_of.get(i).copied().flatten().is_some();
        if overlapping(c) {
            return false;
        }
        let (bc, bp) = (&input.buffers[c], &input.buffers[pi]);
        let legal = bc.slice_of == Some((p, delta))
            && !bc.scratch
            && !bp.scratch
            && !bc.live_to_end
            && slice_of[pi].is_none()
            && offsets[c] == offsets[pi] + delta
            && delta + sizes[c] <= sizes[pi]
            && lives[c].first < bp.def
            && lives[c].last == bp.def
            && bc.uses.iter().filter(|&&u| u == bp.def).count() == 1;
        if !legal {
            return false;
        }
    }
    let paired = |i: usize, j: usize| {
        let slice = |a: usize, b: usize| {
            slice_of.get(a).copied().flatten().map(|s| s.0) == Some(BufferId(b as u32))
        };
        let overlaps = |a: usize, b: usize| {
            overlap_of.get(a).copied().flatten().map(|o| o.0) == Some(BufferId(b as u32))
        };
        alias_of.get(j).copied().flatten() == Some(BufferId(i as u32))
            || alias_of.get(i).copied().flatten() == Some(BufferId(j as u32))
            || overlaps(i, j)
            || overlaps(j, i)
            || slice(i, j)
            || slice(j, i)
    };
    for i in 0..n {
        for j in i + 1..n {
            if sizes[i] == 0 || sizes[j] == 0 || lives[i].is_disjoint(&lives[j]) {
                continue;
            }
            let (a, b) = (offsets[i], offsets[j]);
            if a < b + sizes[j] && b < a + sizes[i] && !paired(i, j) {
                return false;
            }
        }
    }
    true
}

/// O(steps · n) bound with aliases: at each step, the live bytes, not counting an input
/// at the step where it is written over (its bytes are the output's).
pub fn brute_in_place_bound(input: &PlanInput, alias_of: &[Option<BufferId>]) -> usize {
    let lives = naive_lifetimes(input);
    let sizes = naive_sizes(input);
    let mut overwritten_at = vec![None; lives.len()];
    for (y, x) in alias_of.iter().enumerate() {
        if let Some(slot) = x.and_then(|x| overwritten_at.get_mut(x.index())) {
            *slot = Some(input.buffers[y].def);
        }
    }
    (0..input.steps)
        .map(|s| {
            (0..lives.len())
                .filter(|&i| lives[i].contains(s) && overwritten_at[i] != Some(s))
                .map(|i| sizes[i])
                .sum::<usize>()
        })
        .max()
        .unwrap_or(0)
}

/// A network-like random input for timing: one tensor per step, most read within
/// 6 steps, 5 % skip connections up to 200 steps, 10 % kernel scratch, a few
/// outputs at the end; sizes log-uniform from 256 B to 8 MiB. Deterministic in `seed`.
pub fn network_like(n: usize, seed: u64) -> PlanInput {
    let mut state = seed;
    let mut below = |m: u64| {
        // splitmix64
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % m.max(1)
    };
    let steps = n.max(1);
    let mut input = PlanInput::new(steps);
    for i in 0..n {
        let size = 1usize << (8 + below(15));
        let size = size + below(size as u64) as usize;
        let kind = below(100);
        let buffer = if kind < 10 {
            BufferRequest::scratch(format!("s{i}"), size, i)
        } else if i + 10 >= n && kind < 50 {
            BufferRequest::output(format!("o{i}"), size, i)
        } else {
            let len = if kind < 15 {
                1 + below(200)
            } else {
                1 + below(6)
            } as usize;
            BufferRequest::new(format!("t{i}"), size, i, vec![(i + len).min(steps - 1)])
        };
        input.push(buffer);
    }
    input
}

/// A Concat `P` of `c` (written at step 0) and `d` (step 2) at bytes 0 and 256, with a
/// third part of 256 bytes that is no buffer (a weight), and `t` of `t_size` bytes
/// live at steps 1..=2; `r` reads `P`. With a small `t` the slices lower the bound
/// (1024 instead of 1280 bytes); with a large one, reserving `P` from step 0 would
/// raise it.
pub fn concat_example(t_size: usize) -> PlanInput {
    let p = BufferId(3);
    let mut input = PlanInput::new(5);
    input.push(BufferRequest {
        slice_of: Some((p, 0)),
        ..BufferRequest::new("c", 256, 0, vec![3])
    });
    input.push(BufferRequest::new("t", t_size, 1, vec![2]));
    input.push(BufferRequest {
        slice_of: Some((p, 256)),
        ..BufferRequest::new("d", 256, 2, vec![3])
    });
    input.push(BufferRequest::new("P", 768, 3, vec![4]));
    input.push(BufferRequest::output("r", 256, 4));
    input
}

/// image (0) → conv (1: 4 planes of 1024 bytes) → pool (2: 4 planes of 256 bytes, a
/// candidate to start inside conv) → read at 3 beside `other` (`other` bytes, 3..=4).
/// Alignment 64. With the overlap the pool starts 256 bytes below the conv, and
/// `other` fits in the conv's bytes above the pool once the pool's step is over.
pub fn pool_example(image: usize, other: usize) -> PlanInput {
    let mut input = PlanInput::new(5);
    input.alignment = 64;
    input.push(BufferRequest::new("image", image, 0, vec![1]));
    let conv = input.push(BufferRequest::new("conv", 4 * 1024, 1, vec![2]));
    input.push(BufferRequest {
        overlap_of: Some((
            conv,
            super::PlaneOrder {
                planes: 4,
                in_plane: 1024,
                out_plane: 256,
            },
        )),
        ..BufferRequest::new("pool", 1024, 2, vec![3])
    });
    input.push(BufferRequest::new("other", other, 3, vec![4]));
    input
}

/// conv → bn (in place over conv) → relu (in place over bn, a graph output), with a
/// tensor `x` live beside them up to the relu's step.
pub fn in_place_chain() -> PlanInput {
    let mut input = PlanInput::new(4);
    let conv = input.push(BufferRequest::new("conv", 1024, 0, vec![1]));
    input.push(BufferRequest::new("x", 1024, 0, vec![2]));
    let bn = input.push(BufferRequest {
        in_place_of: vec![conv],
        ..BufferRequest::new("bn", 1024, 1, vec![2])
    });
    input.push(BufferRequest {
        in_place_of: vec![bn],
        ..BufferRequest::output("relu", 1024, 2)
    });
    input
}
