//! RotaryEmbedding (ONNX opset 23) over the float element types.
//!
//! Each head's first `rot_dim` elements are rotated pairwise by the angle whose cosine
//! and sine the caches hold for the token's position; the rest are copied. Pairs are
//! `(i, i + rot_dim/2)` (halves) or `(2i, 2i + 1)` (`interleaved`). Arithmetic is in
//! `f64`, each output rounded once to `T`. Shapes were checked by the compiler: a slice
//! of the wrong length asserts.

use super::elem::Elem;
use super::index::Index;
use crate::Error;
use serde::Serialize;

/// Parameters of [`rotary_embedding`] and [`rotary_embedding_pos`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rotary {
    pub batch: usize,
    pub seq: usize,
    pub heads: usize,
    pub head_size: usize,
    /// Rotated elements at the start of each head: even, at most `head_size`.
    pub rot_dim: usize,
    pub interleaved: bool,
    /// `x` is `batch × heads × seq × head_size` (4-D input); otherwise `batch × seq ×
    /// (heads · head_size)` (3-D input).
    pub heads_first: bool,
    /// Rows of the caches (`rot_dim / 2` elements each): `batch · seq` without
    /// position ids, the largest position + 1 with them.
    pub cache_rows: usize,
}

impl Rotary {
    fn check<T>(&self, x: &[T], cos: &[T], sin: &[T], out: &[T]) {
        assert!(
            self.rot_dim.is_multiple_of(2) && self.rot_dim <= self.head_size,
            "rotary_embedding: rot_dim {} for head size {}",
            self.rot_dim,
            self.head_size
        );
        let n = self.batch * self.seq * self.heads * self.head_size;
        assert_eq!(x.len(), n, "rotary_embedding: X");
        assert_eq!(out.len(), n, "rotary_embedding: Y");
        let cache = self.cache_rows * (self.rot_dim / 2);
        assert_eq!(cos.len(), cache, "rotary_embedding: cos_cache");
        assert_eq!(sin.len(), cache, "rotary_embedding: sin_cache");
    }

    /// Offset of head `h` of token `(b, s)` in `x`.
    #[inline]
    fn head_at(&self, b: usize, s: usize, h: usize) -> usize {
        let i = if self.heads_first {
            (b * self.heads + h) * self.seq + s
        } else {
            (b * self.seq + s) * self.heads + h
        };
        i * self.head_size
    }
}

/// Rotates every head of token `(b, s)` with cache row `row`.
#[inline]
#[allow(clippy::too_many_arguments)]
fn rotate_token<T: Elem>(
    p: &Rotary,
    b: usize,
    s: usize,
    row: usize,
    x: &[T],
    cos: &[T],
    sin: &[T],
    out: &mut [T],
) {
    let half = p.rot_dim / 2;
    let (cos, sin) = (
        &cos[row * half..(row + 1) * half],
        &sin[row * half..(row + 1) * half],
    );
    for h in 0..p.heads {
        let at = p.head_at(b, s, h);
        let x = &x[at..at + p.head_size];
        let y = &mut out[at..at + p.head_size];
        for i in 0..half {
            let (i1, i2) = if p.interleaved {
                (2 * i, 2 * i + 1)
            } else {
                (i, i + half)
            };
            let (c, sn) = (cos[i].to_f64(), sin[i].to_f64());
            let (x1, x2) = (x[i1].to_f64(), x[i2].to_f64());
            y[i1] = T::from_f64(c * x1 - sn * x2);
            y[i2] = T::from_f64(sn * x1 + c * x2);
        }
        y[p.rot_dim..].copy_from_slice(&x[p.rot_dim..]);
    }
}

/// ONNX RotaryEmbedding without `position_ids`: `cos` and `sin` are `batch × seq ×
/// rot_dim/2`, one row per token.
pub fn rotary_embedding<T: Elem>(p: &Rotary, x: &[T], cos: &[T], sin: &[T], out: &mut [T]) {
    p.check(x, cos, sin, out);
    assert_eq!(
        p.cache_rows,
        p.batch * p.seq,
        "rotary_embedding: cache rows"
    );
    for b in 0..p.batch {
        for s in 0..p.seq {
            rotate_token(p, b, s, b * p.seq + s, x, cos, sin, out);
        }
    }
}

/// ONNX RotaryEmbedding with `position_ids` (`batch × seq`): token `(b, s)` uses cache
/// row `pos[b, s]` of `cache_rows × rot_dim/2` caches. A position outside
/// `0..cache_rows` (negative included) is `IndexOutOfRange`; the tokens before it have
/// been written.
pub fn rotary_embedding_pos<T: Elem, I: Index>(
    p: &Rotary,
    x: &[T],
    cos: &[T],
    sin: &[T],
    pos: &[I],
    out: &mut [T],
) -> Result<(), Error> {
    p.check(x, cos, sin, out);
    assert_eq!(pos.len(), p.batch * p.seq, "rotary_embedding: position_ids");
    for b in 0..p.batch {
        for s in 0..p.seq {
            let i = pos[b * p.seq + s].index();
            let row = usize::try_from(i)
                .ok()
                .filter(|&r| r < p.cache_rows)
                .ok_or(Error::IndexOutOfRange {
                    index: i,
                    len: p.cache_rows,
                })?;
            rotate_token(p, b, s, row, x, cos, sin, out);
        }
    }
    Ok(())
}
