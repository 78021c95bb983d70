//! Typed views of the arena's `f32`-unit regions, the weights and the caller's input
//! bytes, for the calls generated code makes to typed kernels. Every view is checked
//! (length and alignment), so a wrong plan is an `Err`, never a panic or a misread.

use bytemuck::Pod;

use crate::Error;

fn misfit(what: &'static str, bytes: usize) -> Error {
    Error::Region {
        step: what,
        offset: 0,
        end: bytes,
        problem: "cannot be viewed as the element type the step expects",
    }
}

/// The first `n` elements of type `T` in an `f32`-unit region (arena or weights).
pub fn view<T: Pod>(region: &[f32], n: usize) -> Result<&[T], Error> {
    let bytes: &[u8] = bytemuck::cast_slice(region);
    let want = n * size_of::<T>();
    let head = bytes.get(..want).ok_or(misfit("view", bytes.len()))?;
    bytemuck::try_cast_slice(head).map_err(|_| misfit("view", want))
}

/// The first `n` elements of type `T` in an `f32`-unit region, mutably.
pub fn view_mut<T: Pod>(region: &mut [f32], n: usize) -> Result<&mut [T], Error> {
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(region);
    let have = bytes.len();
    let want = n * size_of::<T>();
    let head = bytes.get_mut(..want).ok_or(misfit("view", have))?;
    bytemuck::try_cast_slice_mut(head).map_err(|_| misfit("view", want))
}

/// A caller's input bytes (already checked against its description) as `T`s.
pub fn input<T: Pod>(bytes: &[u8]) -> Result<&[T], Error> {
    bytemuck::try_cast_slice(bytes).map_err(|_| misfit("input", bytes.len()))
}

/// Copies `x` into `out` (equal lengths; the compiler guarantees it).
pub fn copy<T: Copy>(x: &[T], out: &mut [T]) {
    let n = x.len().min(out.len());
    out[..n].copy_from_slice(&x[..n]);
}
