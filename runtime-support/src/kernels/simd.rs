//! Running plain loops with the best instruction set the CPU has.
//!
//! The crate is built for the baseline target (SSE2 on x86-64), so an ordinary loop is
//! vectorised four lanes wide, without FMA, and `f32::floor` is a libm call.
//! [`vectorize!`] runs a block inside a function compiled for x86-64-v3 (AVX2 + FMA)
//! when the CPU has it, through `pulp` (which faer already depends on and
//! re-exports), so the loops in the block are vectorised eight lanes wide — with no
//! `unsafe` here.
//!
//! That only works if the block's code is inlined into pulp's target-feature
//! function: the macro marks the closure `#[inline(always)]` (without it LLVM keeps a
//! large closure out of line, compiled for the baseline, and e.g. `sigmoid` ran 15×
//! slower), and everything the block calls in its hot loops must be
//! `#[inline(always)]` too. That includes iterator plumbing: write hot loops as `for`
//! loops, since `for_each`, `fold` and `sum` run through std's out-of-line `fold`
//! implementations, compiled for the baseline.
//!
//! The scalar math helpers below ([`exp`], [`sum`]) are written branch-free so that
//! they vectorise inside such loops, which `f32::exp` (a libm call) and
//! `Iterator::sum` (a strictly ordered reduction) do not.

use faer::traits::pulp;

/// Runs the block, compiled for the widest SIMD level the CPU supports.
macro_rules! vectorize {
    ($body:block) => {
        $crate::kernels::simd::dispatch(
            #[inline(always)]
            || $body,
        )
    };
}
pub(crate) use vectorize;

/// Runs `f` under pulp's best instruction set; use it through [`vectorize!`].
#[inline(always)]
pub(crate) fn dispatch<R>(f: impl FnOnce() -> R) -> R {
    pulp::Arch::new().dispatch(f)
}

/// `e^x` in single precision, branch-free so that it vectorises.
///
/// Cephes' `expf`: `x = n ln 2 + r` with `|r| <= ln 2 / 2`, a degree-6 polynomial for
/// `e^r`, and `2^n` built from its exponent bits. Within a few ulp of the exact value
/// over the normal range; results below the smallest normal number (x < -87.3) flush
/// to zero, above `f32::MAX` they are infinite, and NaN stays NaN.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split in two so that `n * LN2_HI` is exact.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // ln(f32::MAX) and ln(f32::MIN_POSITIVE).
    const HI: f32 = 88.722_84;
    const LO: f32 = -87.336_55;
    let xc = x.clamp(LO, HI);
    let n = (xc * LOG2E + 0.5).floor();
    let r = xc - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_1e-4_f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    p = p * r * r + r + 1.0;
    // n is in [-126, 128]; 2^128 is not a float, so the top case is 2^127 * 2.
    // 2^n from its biased exponent n + 127, without a float-to-int conversion (whose
    // saturating form does not vectorise): adding 2^23 puts the integer n + 127 in the
    // low mantissa bits, and the shift moves it into the exponent field.
    let n_lo = n.min(127.0);
    let biased = (n_lo + 127.0 + 8_388_608.0).to_bits();
    let scale = f32::from_bits(biased << 23);
    let y = p * scale * (n - n_lo + 1.0);
    if x > HI {
        f32::INFINITY
    } else if x < LO {
        0.0
    } else {
        y
    }
}

/// Logistic sigmoid `1 / (1 + e^-x)`, vectorisable.
#[inline(always)]
pub(crate) fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

/// Hyperbolic tangent, vectorisable (Cephes' `tanhf`): an odd polynomial below 0.625,
/// where `1 - 2 / (e^2x + 1)` would cancel, and that formula above it.
#[inline(always)]
pub(crate) fn tanh(x: f32) -> f32 {
    let z = x.abs();
    let s = x * x;
    let mut p = -5.704_988_7e-3_f32;
    p = p * s + 2.063_909e-2;
    p = p * s - 5.373_971_6e-2;
    p = p * s + 1.333_144_2e-1;
    p = p * s - 3.333_328e-1;
    let small = p * s * x + x;
    let large = (1.0 - 2.0 / (exp(2.0 * z) + 1.0)).copysign(x);
    if z < 0.625 { small } else { large }
}

/// The error function in single precision, vectorisable: the rational approximation
/// Eigen and XLA use (odd degree-13 over even degree-8 in `x`, on `x` clamped to
/// [-4, 4], where `erf` is 1 to single precision). Within 5e-7 of the exact value
/// everywhere (the test checks 2 million points); NaN stays NaN.
#[inline(always)]
pub(crate) fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = -2.726_142_3e-10_f32;
    p = p * x2 + 2.770_681_4e-8;
    p = p * x2 - 2.101_024e-6;
    p = p * x2 - 5.692_506_4e-5;
    p = p * x2 - 7.349_906_3e-4;
    p = p * x2 - 2.954_6e-3;
    p = p * x2 - 1.609_603_3e-2;
    let mut q = -1.456_607_2e-5_f32;
    q = q * x2 - 2.133_740_6e-4;
    q = q * x2 - 1.682_827e-3;
    q = q * x2 - 7.373_329e-3;
    q = q * x2 - 1.426_473_9e-2;
    x * p / q
}

/// Sum of `x` with eight independent partial sums, so it vectorises (the order of
/// additions differs from a left-to-right sum by rounding only).
#[inline(always)]
pub(crate) fn sum(x: &[f32]) -> f32 {
    fold8(x, 0.0, |acc, v| acc + v, |a, b| a + b)
}

/// The sum of `f(v)` over `x`, without storing the mapped values: they go through a
/// block on the stack, so that the map vectorises as a plain loop and [`sum`] adds
/// each block.
#[inline(always)]
pub(crate) fn sum_of(x: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    const BLOCK: usize = 256;
    let mut buf = [0.0f32; BLOCK];
    let mut total = 0.0;
    for chunk in x.chunks(BLOCK) {
        let buf = &mut buf[..chunk.len()];
        for (b, &v) in buf.iter_mut().zip(chunk) {
            *b = f(v);
        }
        total += sum(buf);
    }
    total
}

/// Maximum of `x` (`-inf` when empty), vectorisable.
#[inline(always)]
pub(crate) fn max(x: &[f32]) -> f32 {
    fold8(x, f32::NEG_INFINITY, f32::max, f32::max)
}

/// `Σ a[k] · b[k]` over 32 independent partial sums (four 8-lane vectors, so the adds'
/// latency overlaps), compiled for the CPU's widest SIMD level: the dot products of
/// the recurrent kernels, called once per gate row and step.
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "dot: lengths");
    vectorize!({ dot_inline(a, b) })
}

#[inline(always)]
fn dot_inline(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 32;
    {
        let mut acc = [0.0f32; LANES];
        let (a32, b32) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
        let (a_tail, b_tail) = (a32.remainder(), b32.remainder());
        for (x, y) in a32.zip(b32) {
            for k in 0..LANES {
                acc[k] += x[k] * y[k];
            }
        }
        for (k, (x, y)) in a_tail.iter().zip(b_tail).enumerate() {
            acc[k] += x * y;
        }
        let mut total = 0.0;
        for v in acc {
            total += v;
        }
        total
    }
}

/// A reduction with eight independent accumulators, combined with `merge` at the end.
#[inline(always)]
fn fold8(
    x: &[f32],
    init: f32,
    step: impl Fn(f32, f32) -> f32,
    merge: impl Fn(f32, f32) -> f32,
) -> f32 {
    let mut acc = [init; 8];
    let chunks = x.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a = step(*a, v);
        }
    }
    let mut r = init;
    for a in acc {
        r = merge(r, a);
    }
    for &v in tail {
        r = step(r, v);
    }
    r
}
