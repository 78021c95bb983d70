//! Buffers on 2 MiB pages where Linux gives them: the weights and the arena.
//!
//! A run streams a model's weights in full (ResNet-50's 100 MB, from DRAM) and walks
//! megabytes of arena. On 4 KiB pages that is a TLB miss and a page walk every 4 KiB,
//! where a weight row of 1024 floats is a page of its own. One Zen 4 core, weights out
//! of cache: a 1024→2048 1×1 layer at 7² (8 MiB of weights) ran 2.72 ms on 4 KiB pages
//! and 2.15 ms on 2 MiB ones, 512→2048 1.18 → 1.05; its input and output on 2 MiB
//! pages took 256→64 at 56² from 1.43 to 1.33 ms.
//!
//! A [`LargePages`] buffer of at least a huge page starts on a huge-page boundary and
//! is advised `MADV_HUGEPAGE` before its first write, so transparent huge pages back it
//! even where the system gives them only on request (`enabled = madvise`, the usual
//! default). Elsewhere, or where the kernel declines, it is an ordinary vector: the
//! advice changes where the bytes live, never what they are.

use std::mem::{MaybeUninit, size_of};
use std::ops::{Deref, DerefMut};

/// A huge page on x86-64 and aarch64 Linux (4 KiB base pages).
pub const HUGE_PAGE: usize = 2 << 20;

/// `len` elements of `T`, starting on a [`HUGE_PAGE`] boundary and advised as huge
/// pages where they span at least one (the allocation is up to a huge page larger,
/// its head before the boundary zeroed and unused); a plain vector where they do not.
pub struct LargePages<T> {
    buf: Vec<T>,
    start: usize,
    len: usize,
}

impl<T: bytemuck::Pod> LargePages<T> {
    /// `len` zeroed elements.
    pub fn zeroed(len: usize) -> Self {
        Self::filled(len, |buf| buf.resize(buf.len() + len, T::zeroed()))
    }

    /// A copy of `data`.
    pub fn copy_of(data: &[T]) -> Self {
        Self::filled(data.len(), |buf| buf.extend_from_slice(data))
    }

    /// The `len` elements `items` yields (exactly that many).
    pub fn collect(len: usize, items: impl IntoIterator<Item = T>) -> Self {
        Self::filled(len, |buf| buf.extend(items.into_iter().take(len)))
    }

    /// `len` elements that `fill` appends to the buffer, each written once: on huge
    /// pages after the advice where they span one.
    fn filled(len: usize, fill: impl FnOnce(&mut Vec<T>)) -> Self {
        let size = size_of::<T>().max(1);
        let (mut buf, start) = if len.saturating_mul(size) < HUGE_PAGE {
            (Vec::with_capacity(len), 0)
        } else {
            // Room to start on the first huge-page boundary inside the allocation.
            let extra = HUGE_PAGE.div_ceil(size);
            let mut buf: Vec<T> = Vec::with_capacity(len + extra);
            let start = buf.as_ptr().align_offset(HUGE_PAGE).min(extra);
            advise_huge_pages(&mut buf.spare_capacity_mut()[start..start + len]);
            buf.resize(start, T::zeroed());
            (buf, start)
        };
        fill(&mut buf);
        assert_eq!(
            buf.len(),
            start + len,
            "LargePages: filled with another length"
        );
        LargePages { buf, start, len }
    }
}

impl<T> Deref for LargePages<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        &self.buf[self.start..][..self.len]
    }
}

impl<T> DerefMut for LargePages<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.buf[self.start..][..self.len]
    }
}

/// Asks Linux to back `region` with transparent huge pages, before anything is
/// written to it (a page already faulted in stays small until `khugepaged` gets to
/// it). Errors are ignored: the advice is only advice.
#[cfg(target_os = "linux")]
fn advise_huge_pages<T>(region: &mut [MaybeUninit<T>]) {
    // Whole base pages from the region's start (a huge-page boundary where the
    // allocation had one), so the advice covers no byte outside it.
    let len = size_of_val(region) / 4096 * 4096;
    // SAFETY: `region` is part of a live allocation of this process, borrowed
    // mutably, so nothing else uses it; `len` does not run past its end. MADV_HUGEPAGE
    // neither reads nor changes the bytes, and leaves the memory mapped and valid: it
    // only marks the range as eligible for huge pages.
    let _ = unsafe { libc::madvise(region.as_mut_ptr().cast(), len, libc::MADV_HUGEPAGE) };
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages<T>(_region: &mut [MaybeUninit<T>]) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_buffers_are_plain_vectors() {
        let b = LargePages::<f32>::zeroed(1000);
        assert_eq!(b.len(), 1000);
        assert!(b.iter().all(|&v| v == 0.0));
        assert_eq!(b.start, 0);
    }

    #[test]
    fn large_buffers_start_on_a_huge_page_and_hold_their_data() {
        let len = HUGE_PAGE / 4 * 3 + 5;
        let data: Vec<f32> = (0..len).map(|i| i as f32).collect();
        let collected = LargePages::collect(len, data.iter().copied());
        assert_eq!(&collected[..], &data[..]);
        let mut b = LargePages::copy_of(&data);
        assert_eq!(b.as_ptr() as usize % HUGE_PAGE, 0);
        assert_eq!(&b[..], &data[..]);
        b[len - 1] = -1.0;
        assert_eq!(b[len - 1], -1.0);
        // Elements of the arena's kind: 256 bytes, aligned to theirs.
        #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
        #[repr(C, align(256))]
        struct Block([f32; 64]);
        let z = LargePages::<Block>::zeroed(HUGE_PAGE / 256 + 1);
        assert_eq!(z.as_ptr() as usize % HUGE_PAGE, 0);
        assert!(z.iter().flat_map(|b| b.0).all(|v| v == 0.0));
    }
}
