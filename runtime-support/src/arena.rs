//! The per-context working memory and checked access to its planned regions.
//!
//! Every tensor the compiler planned lives at a constant byte offset in one arena. A
//! step borrows the regions it writes mutably and the regions it reads shared; the
//! split below is written with `split_at_mut` only, so a wrong offset becomes an
//! [`Error::Region`] instead of aliasing `&mut` borrows.
//!
//! A step the planner put in place (its output over an input that dies there, for an
//! elementwise or row-wise kernel) borrows only its output, through
//! [`Arena::regions_in_place`], and calls the kernel's in-place form, which reads each
//! element of that region before writing it.
//!
//! A step whose output the planner placed partly over its input (segment overlapping:
//! a pooling kernel that reads input plane `q` and writes output plane `q`, planes in
//! order) borrows both through [`Arena::regions_overlapping`], which proves before
//! handing them out that no output plane lands on an input plane not yet read.

use crate::Error;
use crate::pages::LargePages;
use std::ops::Range;

/// Base alignment of every arena, in bytes. Planned offsets are multiples of the plan's
/// alignment, which never exceeds this.
pub const ARENA_ALIGN: usize = 256;

#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(256))]
struct Block([f32; ARENA_ALIGN / 4]);

/// A byte region of the arena: `offset` in bytes, `len` in `f32` elements.
pub type Region = (usize, usize);

/// The regions one step borrows: `M` written, `R` read.
pub type Borrowed<'a, const M: usize, const R: usize> = ([&'a mut [f32]; M], [&'a [f32]; R]);

/// One context's working memory, allocated once, on huge pages where it spans one
/// ([`LargePages`]).
pub struct Arena {
    blocks: LargePages<Block>,
}

impl Arena {
    /// Allocates `bytes` of zeroed memory, aligned to [`ARENA_ALIGN`].
    pub fn new(bytes: usize) -> Self {
        let n = bytes.div_ceil(ARENA_ALIGN);
        Arena {
            blocks: LargePages::zeroed(n),
        }
    }

    /// Size in bytes (the requested size rounded up to [`ARENA_ALIGN`]).
    pub fn len_bytes(&self) -> usize {
        self.blocks.len() * ARENA_ALIGN
    }

    /// The whole arena as `f32` elements.
    pub fn as_f32(&self) -> &[f32] {
        bytemuck::cast_slice(&self.blocks)
    }

    /// The whole arena as `f32` elements, mutably.
    pub fn as_f32_mut(&mut self) -> &mut [f32] {
        bytemuck::cast_slice_mut(&mut self.blocks)
    }

    /// A region for reading, for example an output after `run`.
    pub fn region(&self, step: &'static str, r: Region) -> Result<&[f32], Error> {
        let (start, end) = elem_range(step, r, self.as_f32().len())?;
        Ok(&self.as_f32()[start..end])
    }

    /// Borrows `M` regions mutably and `R` regions shared for one step.
    ///
    /// Mutable regions must be disjoint from each other and from every shared region;
    /// shared regions may overlap each other. Empty regions are always allowed.
    pub fn regions<const M: usize, const R: usize>(
        &mut self,
        step: &'static str,
        muts: [Region; M],
        refs: [Region; R],
    ) -> Result<Borrowed<'_, M, R>, Error> {
        split_regions(self.as_f32_mut(), step, muts, refs)
    }

    /// [`Arena::regions`] for a step that writes `muts[0]` over its input `input` (an
    /// in-place kernel, which reads the input through `muts[0]`, so `input` is not
    /// borrowed). The two must be the very same region: a plan that put them apart is
    /// an [`Error::Region`], not a kernel reading bytes that are not its input.
    pub fn regions_in_place<const M: usize, const R: usize>(
        &mut self,
        step: &'static str,
        muts: [Region; M],
        refs: [Region; R],
        input: Region,
    ) -> Result<Borrowed<'_, M, R>, Error> {
        if muts.first() != Some(&input) {
            let (offset, len) = input;
            return Err(Error::Region {
                step,
                offset,
                end: offset.saturating_add(len.saturating_mul(4)),
                problem: "is read in place but is not the region this step writes",
            });
        }
        self.regions(step, muts, refs)
    }

    /// Borrows a step's output `out` and its input `input`, which the planner placed on
    /// shared bytes, for a kernel that processes `planes` planes in order, reading input
    /// plane `q` then writing output plane `q`. Errors unless both lie in the arena,
    /// split into `planes` equal planes, and no output plane lands on an input plane
    /// not yet read ([`planes_in_order_are_safe`]).
    pub fn regions_overlapping(
        &mut self,
        step: &'static str,
        out: Region,
        input: Region,
        planes: usize,
    ) -> Result<Overlapped<'_>, Error> {
        let mem = self.as_f32_mut();
        let (ys, ye) = elem_range(step, out, mem.len())?;
        let (xs, xe) = elem_range(step, input, mem.len())?;
        let split = |len: usize| match len.checked_div(planes) {
            Some(plane) if plane * planes == len => Some(plane),
            None if len == 0 => Some(0),
            _ => None,
        };
        let (Some(x_plane), Some(y_plane)) = (split(xe - xs), split(ye - ys)) else {
            return Err(region_err(step, (ys, ye), "does not split into its planes"));
        };
        let base = xs.min(ys);
        let (x_at, y_at) = (xs - base, ys - base);
        if !planes_in_order_are_safe(x_at, y_at, x_plane, y_plane, planes) {
            return Err(region_err(
                step,
                (ys, ye),
                "overlaps input planes it has not read yet",
            ));
        }
        Ok(Overlapped {
            span: &mut mem[base..xe.max(ye)],
            x_at,
            y_at,
            x_plane,
            y_plane,
            planes,
        })
    }
}

/// The input and output of a plane-by-plane kernel that share bytes
/// ([`Arena::regions_overlapping`]): plane `q` of each is borrowed apart by
/// [`Overlapped::plane`].
pub struct Overlapped<'a> {
    span: &'a mut [f32],
    x_at: usize,
    y_at: usize,
    x_plane: usize,
    y_plane: usize,
    planes: usize,
}

impl Overlapped<'_> {
    /// Number of planes.
    pub fn planes(&self) -> usize {
        self.planes
    }

    /// Elements of the whole input and the whole output.
    pub fn lens(&self) -> (usize, usize) {
        (self.planes * self.x_plane, self.planes * self.y_plane)
    }

    /// Input planes `planes`, for a kernel that reads a block of planes whole before it
    /// writes their outputs ([`Overlapped::outputs`]).
    pub fn inputs(&self, planes: Range<usize>) -> &[f32] {
        self.check_block(&planes);
        &self.span[self.x_at + planes.start * self.x_plane..][..planes.len() * self.x_plane]
    }

    /// Output planes `planes`, written once their input planes have been read
    /// ([`Overlapped::inputs`]): they lie on no input plane after the block (each
    /// output plane lies on no input plane from its own on, proved when `self` was
    /// made), only on the block's own and earlier ones.
    pub fn outputs(&mut self, planes: Range<usize>) -> &mut [f32] {
        self.check_block(&planes);
        &mut self.span[self.y_at + planes.start * self.y_plane..][..planes.len() * self.y_plane]
    }

    /// Panics unless `planes` is a block of this call's planes.
    fn check_block(&self, planes: &Range<usize>) {
        assert!(
            planes.start <= planes.end && planes.end <= self.planes,
            "planes {planes:?} of {}",
            self.planes
        );
    }

    /// The end of the longest run of planes from `first` whose output planes lie on no
    /// input plane from `first` on, so that they may be pooled in any order (by several
    /// threads at once) once the planes before `first` are done: at least `first + 1`
    /// (the condition proved when `self` was made), at most the number of planes.
    pub fn apart_from(&self, first: usize) -> usize {
        assert!(first < self.planes, "plane {first} of {}", self.planes);
        let inputs = self.x_at + first * self.x_plane..self.x_at + self.planes * self.x_plane;
        let outputs_at = self.y_at + first * self.y_plane;
        if self.y_plane == 0 || outputs_at >= inputs.end {
            return self.planes;
        }
        // Output planes `first..end` end at or before input plane `first`.
        let end = inputs.start.saturating_sub(self.y_at) / self.y_plane;
        end.clamp(first + 1, self.planes)
    }

    /// Input planes `planes` (read) and output planes `planes` (written), a run
    /// [`Overlapped::apart_from`] allows: they are disjoint.
    pub fn apart(&mut self, planes: Range<usize>) -> (&[f32], &mut [f32]) {
        self.check_block(&planes);
        assert!(
            !planes.is_empty() && planes.end <= self.apart_from(planes.start),
            "planes {planes:?} are not apart"
        );
        let x = self.x_at + planes.start * self.x_plane;
        let y = self.y_at + planes.start * self.y_plane;
        let (x_len, y_len) = (planes.len() * self.x_plane, planes.len() * self.y_plane);
        if y + y_len <= x {
            let (lo, hi) = self.span.split_at_mut(x);
            (&hi[..x_len], &mut lo[y..y + y_len])
        } else {
            let (lo, hi) = self.span.split_at_mut(y);
            (&lo[x..x + x_len], &mut hi[..y_len])
        }
    }

    /// Input plane `q` (read) and output plane `q` (written). They are disjoint, and the
    /// output plane lies on no input plane after `q`: proved when `self` was made.
    pub fn plane(&mut self, q: usize) -> (&[f32], &mut [f32]) {
        assert!(q < self.planes, "plane {q} of {}", self.planes);
        self.apart(q..q + 1)
    }
}

/// Whether writing output plane `q` at `y_at + q * y_plane` (elements), planes in
/// order, never lands on input plane `q` or a later one (at `x_at + q * x_plane`): the
/// condition under which a kernel that reads input plane `q` and then writes output
/// plane `q` reads only its input's own values. The planner's validator proves the same
/// condition from the plan ([`Arena::regions_overlapping`] re-checks it at run time).
pub fn planes_in_order_are_safe(
    x_at: usize,
    y_at: usize,
    x_plane: usize,
    y_plane: usize,
    planes: usize,
) -> bool {
    let input_end = x_at + planes * x_plane;
    (0..planes).all(|q| {
        let (y, x) = (y_at + q * y_plane, x_at + q * x_plane);
        y_plane == 0 || y + y_plane <= x || y >= input_end
    })
}

fn elem_range(
    step: &'static str,
    (offset, len): Region,
    total: usize,
) -> Result<(usize, usize), Error> {
    let bad = |problem| Error::Region {
        step,
        offset,
        end: offset.saturating_add(len.saturating_mul(4)),
        problem,
    };
    if !offset.is_multiple_of(4) {
        return Err(bad("is not aligned to 4 bytes"));
    }
    let start = offset / 4;
    let end = start.checked_add(len).ok_or_else(|| bad("overflows"))?;
    if end > total {
        return Err(bad("lies outside the arena"));
    }
    Ok((start, end))
}

/// The safe core of [`Arena::regions`], on a plain slice so it can be tested directly.
pub fn split_regions<'a, const M: usize, const R: usize>(
    mut mem: &'a mut [f32],
    step: &'static str,
    muts: [Region; M],
    refs: [Region; R],
) -> Result<Borrowed<'a, M, R>, Error> {
    let total = mem.len();
    let mut mut_ranges = [(0usize, 0usize); M];
    for (slot, r) in mut_ranges.iter_mut().zip(muts) {
        *slot = elem_range(step, r, total)?;
    }
    let mut ref_ranges = [(0usize, 0usize); R];
    for (slot, r) in ref_ranges.iter_mut().zip(refs) {
        *slot = elem_range(step, r, total)?;
    }
    let overlap = |a: (usize, usize), b: (usize, usize)| a.0 < b.1 && b.0 < a.1;
    for i in 0..M {
        for j in 0..M {
            if i != j && overlap(mut_ranges[i], mut_ranges[j]) {
                return Err(region_err(
                    step,
                    mut_ranges[i],
                    "overlaps another region written by this step",
                ));
            }
        }
        for r in ref_ranges {
            if overlap(mut_ranges[i], r) {
                return Err(region_err(step, r, "is read while it is being written"));
            }
        }
    }

    // Walk the mutable regions in address order, cutting `mem` into
    // gap, mut, gap, mut, ..., gap. Each shared region lies inside one gap.
    let mut order: [usize; M] = std::array::from_fn(|i| i);
    order.sort_by_key(|&i| mut_ranges[i].0);
    let mut out_muts: [Option<&'a mut [f32]>; M] = std::array::from_fn(|_| None);
    let mut out_refs: [&'a [f32]; R] = [&[]; R];
    let mut base = 0usize;
    let mut filled = [false; R];
    for &i in &order {
        let (start, end) = mut_ranges[i];
        let (gap, rest) = std::mem::take(&mut mem).split_at_mut(start - base);
        let (m, rest) = rest.split_at_mut(end - start);
        place_refs(gap, base, &ref_ranges, &mut out_refs, &mut filled);
        out_muts[i] = Some(m);
        mem = rest;
        base = end;
    }
    place_refs(mem, base, &ref_ranges, &mut out_refs, &mut filled);
    let muts = out_muts.map(|m| m.unwrap_or_default());
    Ok((muts, out_refs))
}

fn place_refs<'a, const R: usize>(
    gap: &'a [f32],
    base: usize,
    ranges: &[(usize, usize); R],
    out: &mut [&'a [f32]; R],
    filled: &mut [bool; R],
) {
    let gap_end = base + gap.len();
    for (k, &(s, e)) in ranges.iter().enumerate() {
        if !filled[k] && s >= base && e <= gap_end {
            out[k] = &gap[s - base..e - base];
            filled[k] = true;
        }
    }
}

fn region_err(step: &'static str, (s, e): (usize, usize), problem: &'static str) -> Error {
    Error::Region {
        step,
        offset: s * 4,
        end: e * 4,
        problem,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_disjoint_regions() {
        let mut a = Arena::new(1024);
        let ([x, y], [r]) = a.regions("t", [(0, 4), (512, 8)], [(256, 16)]).unwrap();
        x.fill(1.0);
        y.fill(2.0);
        assert_eq!(r.len(), 16);
        assert_eq!(a.as_f32()[..4], [1.0; 4]);
        assert_eq!(a.as_f32()[128..136], [2.0; 8]);
    }

    #[test]
    fn shared_regions_may_overlap_each_other() {
        let mut a = Arena::new(1024);
        let ([_], [r1, r2]) = a.regions("t", [(0, 4)], [(64, 8), (72, 8)]).unwrap();
        assert_eq!((r1.len(), r2.len()), (8, 8));
    }

    #[test]
    fn rejects_read_of_written_region() {
        let mut a = Arena::new(1024);
        let e = a.regions("conv1", [(0, 64)], [(128, 64)]).err().unwrap();
        assert!(e.to_string().contains("conv1"), "{e}");
    }

    #[test]
    fn rejects_overlapping_writes_and_out_of_bounds() {
        let mut a = Arena::new(1024);
        assert!(a.regions("t", [(0, 64), (252, 1)], []).is_err());
        assert!(a.regions("t", [(1020, 2)], []).is_err());
        assert!(a.regions("t", [(2, 1)], []).is_err());
        assert!(a.regions("t", [], [(usize::MAX - 3, 4)]).is_err());
    }

    #[test]
    fn in_place_input_must_be_the_written_region() {
        let mut a = Arena::new(1024);
        let ([y], [r]) = a
            .regions_in_place("relu", [(256, 64)], [(0, 8)], (256, 64))
            .unwrap();
        assert_eq!((y.len(), r.len()), (64, 8));
        for input in [(0, 64), (256, 63), (512, 64)] {
            let e = a
                .regions_in_place("relu", [(256, 64)], [], input)
                .err()
                .unwrap();
            assert!(e.to_string().contains("read in place"), "{e}");
        }
        assert!(a.regions_in_place("t", [], [], (0, 0)).is_err());
    }

    #[test]
    fn overlapping_regions_hand_out_each_plane_apart() {
        let mut a = Arena::new(4096);
        a.as_f32_mut()[..]
            .iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = i as f32);
        // Input: 4 planes of 16 at element 64; output: 4 planes of 8, one plane lower.
        let mut o = a
            .regions_overlapping("pool", (56 * 4, 32), (64 * 4, 64), 4)
            .unwrap();
        assert_eq!((o.planes(), o.lens()), (4, (64, 32)));
        for q in 0..4 {
            let (x, y) = o.plane(q);
            assert_eq!(x[0], (64 + 16 * q) as f32);
            y.fill(-1.0);
        }
        assert_eq!(a.as_f32()[56..88], [-1.0; 32]);
        // Output plane 1 would land on input plane 1 before it is read.
        let e = a
            .regions_overlapping("pool", (64 * 4, 32), (64 * 4, 64), 4)
            .err()
            .unwrap();
        assert!(e.to_string().contains("not read yet"), "{e}");
        // Entirely after the input is fine; lengths must split into the planes.
        assert!(
            a.regions_overlapping("t", (128 * 4, 32), (64 * 4, 64), 4)
                .is_ok()
        );
        assert!(
            a.regions_overlapping("t", (0, 30), (64 * 4, 64), 4)
                .is_err()
        );
        assert!(a.regions_overlapping("t", (0, 0), (0, 0), 0).is_ok());
        assert!(a.regions_overlapping("t", (0, 8), (64, 8), 0).is_err());
        assert!(a.regions_overlapping("t", (4096, 8), (0, 8), 1).is_err());
    }

    #[test]
    fn plane_safety_matches_brute_force() {
        // A plane-by-plane kernel over tagged memory: every read must see the input.
        for (px, py, planes) in [(9, 4, 3), (4, 4, 5), (3, 5, 4), (1, 1, 1), (6, 2, 1)] {
            for x_at in 0..12 {
                for y_at in 0..40 {
                    let mut mem = [0u8; 80];
                    mem[x_at..x_at + planes * px].fill(1);
                    let mut clean = true;
                    // Pooling fills its output plane, then reads the input plane.
                    for q in 0..planes {
                        mem[y_at + q * py..y_at + (q + 1) * py].fill(2);
                        let x = x_at + q * px;
                        clean &= mem[x..x + px].iter().all(|&t| t == 1);
                    }
                    assert_eq!(
                        planes_in_order_are_safe(x_at, y_at, px, py, planes),
                        clean,
                        "x {x_at} y {y_at} planes {planes}x({px}->{py})"
                    );
                }
            }
        }
    }

    #[test]
    fn empty_regions_are_fine() {
        let mut a = Arena::new(256);
        let ([m], [r]) = a.regions("t", [(0, 0)], [(0, 0)]).unwrap();
        assert!(m.is_empty() && r.is_empty());
    }
}
