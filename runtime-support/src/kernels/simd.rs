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
//! Two widths: [`dispatch_wide`] runs at AVX-512 (x86-64-v4) where the CPU has it,
//! for the products' micro-kernel (`packed.rs`, `blocked.rs`: half the instructions
//! for the same multiply-adds) and the transcendental maps ([`map_vectors`]: written
//! in pulp's vector operations, each lane's the same at either width; Swish over
//! 410k floats 0.194 → 0.121 ms, Sigmoid 0.153 → 0.106 on one Zen 4 core). Every
//! other kernel, and [`vectorize!`], is pinned to AVX2 by [`dispatch_narrow`]: they
//! are written for blocks of eight channels, and loops compiled for AVX-512 ran
//! slower (the Winograd transforms: `bench_winograd` 80 → 137 ms). The direct
//! convolution's explicit eight-lane tiles are compiled for AVX-512 all the same
//! ([`dispatch_narrow_wide_registers`]), for its 32 registers: they hold twice the
//! accumulators; with an even count of blocks it runs at sixteen lanes, two blocks
//! to a vector, where [`sixteen_lanes`] says the CPU has them.
//!
//! The scalar math helpers below ([`exp`], [`sum`]) are written branch-free so that
//! they vectorise inside such loops, which `f32::exp` (a libm call) and
//! `Iterator::sum` (a strictly ordered reduction) do not.

use faer::traits::pulp::{self, Simd, WithSimd};

/// Runs the block, compiled for AVX2 where the CPU has it (else the best it has).
macro_rules! vectorize {
    ($body:block) => {
        $crate::kernels::simd::dispatch(
            #[inline(always)]
            || $body,
        )
    };
}
pub(crate) use vectorize;

/// Runs `f` at AVX2 where the CPU has it, else as it is compiled; use it through
/// [`vectorize!`].
///
/// Not through `pulp::Arch::dispatch`, which would also compile `f` for AVX-512: each
/// copy of a helper called from more places loses LLVM's bonus for inlining a
/// function's only call, and the Winograd transforms' helpers were left out of line
/// (F(4×4) 16→64 at 55², 0.49 → 0.55 ms).
#[inline(always)]
pub(crate) fn dispatch<R>(f: impl FnOnce() -> R) -> R {
    dispatch_narrow(Block(f))
}

/// A [`vectorize!`] block as an operation for [`dispatch_narrow`]: it names no vector
/// type, so any lanes do.
struct Block<F>(F);

impl<R, F: FnOnce() -> R> WithSimd for Block<F> {
    type Output = R;

    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) -> R {
        (self.0)()
    }
}

/// Runs `op` at eight lanes (AVX2) where the CPU has them, else on scalars: one copy
/// fewer than `pulp::Arch::dispatch` (see [`dispatch`]).
#[inline(always)]
pub(crate) fn dispatch_narrow<Op: WithSimd>(op: Op) -> Op::Output {
    #[cfg(target_arch = "x86_64")]
    return match pulp::x86::V3::try_new() {
        Some(v3) => Simd::vectorize(v3, op),
        None => op.with_simd(pulp::Scalar::new()),
    };
    #[cfg(not(target_arch = "x86_64"))]
    pulp::Arch::new().dispatch(op)
}

/// Runs `op` at eight lanes as [`dispatch_narrow`] does, but compiled for AVX-512
/// where the CPU has it ([`wide_registers`]): the same AVX2 operations, with 32
/// vector registers instead of 16, for tiles that want more accumulators than 16
/// registers hold (the direct kernel's four blocks at once), or more loads kept for
/// later taps (the depthwise kernel's at stride 2).
#[inline(always)]
pub(crate) fn dispatch_narrow_wide_registers<Op: WithSimd>(op: Op) -> Op::Output {
    #[cfg(target_arch = "x86_64")]
    if let Some(v4) = pulp::x86::V4::try_new() {
        let v3: pulp::x86::V3 = *v4;
        return v4.vectorize(
            #[inline(always)]
            move || op.with_simd(v3),
        );
    }
    dispatch_narrow(op)
}

/// Whether [`dispatch_narrow_wide_registers`] gives its operation 32 vector registers.
#[inline(always)]
pub(crate) fn wide_registers() -> bool {
    #[cfg(target_arch = "x86_64")]
    return pulp::x86::V4::try_new().is_some();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether [`dispatch_wide`] runs its operation at sixteen lanes (AVX-512): a kernel
/// that lays its data out for the width it will run at asks this first.
#[inline(always)]
pub(crate) fn sixteen_lanes() -> bool {
    #[cfg(test)]
    if NARROW_ONLY.get() {
        return false;
    }
    wide_registers()
}

/// Whether the CPU issues its sixteen-lane multiply-adds whole, two a cycle: AVX-512
/// on any core but AMD's Zen 4 (family 19h, the only one with AVX-512), which splits
/// each into two eight-lane halves and so does no more multiply-adds a cycle at
/// sixteen lanes than at eight. A kernel that wins only by the rate goes elsewhere
/// there (`winograd::conv2d_winograd_or_direct`). Read once; the same on every call.
#[inline(always)]
pub(crate) fn full_rate_sixteen_lanes() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static ZEN4: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        sixteen_lanes() && !*ZEN4.get_or_init(zen4)
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether this is an AMD CPU of family 19h (Zen 3 and Zen 4; of those, only Zen 4
/// has AVX-512).
#[cfg(target_arch = "x86_64")]
fn zen4() -> bool {
    use std::arch::x86_64::__cpuid;
    let vendor = __cpuid(0);
    let amd = (vendor.ebx, vendor.edx, vendor.ecx) == (0x6874_7541, 0x6974_6e65, 0x444d_4163);
    let signature = __cpuid(1).eax;
    let base = (signature >> 8) & 0xf;
    let family = if base == 0xf {
        base + ((signature >> 20) & 0xff)
    } else {
        base
    };
    amd && family == 0x19
}

/// Runs `op` at the widest vectors the CPU has (sixteen lanes with AVX-512).
#[inline(always)]
pub(crate) fn dispatch_wide<Op: WithSimd>(op: Op) -> Op::Output {
    #[cfg(test)]
    if NARROW_ONLY.get() {
        return dispatch_narrow(op);
    }
    pulp::Arch::new().dispatch(op)
}

#[cfg(test)]
thread_local! {
    /// Makes [`dispatch_wide`] run at eight lanes on this thread, so that a test can
    /// check its kernels at both widths on a CPU with AVX-512.
    pub(crate) static NARROW_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `f` run twice, at the widest vectors and at eight lanes (the same where the CPU has
/// no AVX-512).
#[cfg(test)]
pub(crate) fn at_both_widths<R>(f: impl Fn() -> R) -> [R; 2] {
    let wide = f();
    NARROW_ONLY.set(true);
    let narrow = f();
    NARROW_ONLY.set(false);
    [wide, narrow]
}

/// Floats in a cache line (64 bytes on every CPU the kernels are tuned for).
pub(crate) const LINE: usize = 64 / size_of::<f32>();

/// Asks the CPU to bring the cache line holding `p` into cache: a hint, for a stream
/// the hardware prefetchers would follow late; any address may be given.
#[inline(always)]
pub(crate) fn prefetch(p: *const f32) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 CPU has; a prefetch reads
    // nothing into the program and never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Constants of Cephes' `expf`, shared by [`exp`] and [`exp_vector`].
mod expf {
    pub const LOG2E: f32 = std::f32::consts::LOG2_E;
    /// ln 2 split in two so that `n * LN2_HI` is exact.
    pub const LN2_HI: f32 = 0.693_359_4;
    pub const LN2_LO: f32 = -2.121_944_4e-4;
    /// ln(f32::MAX) and ln(f32::MIN_POSITIVE).
    pub const HI: f32 = 88.722_84;
    pub const LO: f32 = -87.336_55;
    /// The polynomial for `(e^r - 1 - r) / r^2`, highest degree first.
    pub const POLY: [f32; 6] = [
        1.987_569_1e-4,
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        1.666_666_5e-1,
        0.5,
    ];
    /// Adding 2^23 to an integer-valued float in [0, 2^23) puts the integer in the low
    /// mantissa bits, from where a shift moves it into the exponent field.
    pub const TWO_23: f32 = 8_388_608.0;
}

/// `e^x` in single precision, branch-free so that it vectorises.
///
/// Cephes' `expf`: `x = n ln 2 + r` with `|r| <= ln 2 / 2`, a degree-6 polynomial for
/// `e^r`, and `2^n` built from its exponent bits. Within a few ulp of the exact value
/// over the normal range; results below the smallest normal number (x < -87.3) flush
/// to zero, above `f32::MAX` they are infinite, and NaN stays NaN.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    use expf::*;
    let xc = x.clamp(LO, HI);
    let n = (xc * LOG2E + 0.5).floor();
    let r = xc - n * LN2_HI - n * LN2_LO;
    let mut p = POLY[0];
    for c in &POLY[1..] {
        p = p * r + c;
    }
    p = p * r * r + r + 1.0;
    // n is in [-126, 128]; 2^128 is not a float, so the top case is 2^127 * 2.
    // 2^n from its biased exponent n + 127, without a float-to-int conversion (whose
    // saturating form does not vectorise).
    let n_lo = n.min(127.0);
    let biased = (n_lo + 127.0 + TWO_23).to_bits();
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

/// Vectors that the vector maps work on at once: four independent dependency chains
/// interleaved, so that the out-of-order core overlaps their latencies (one chain per
/// loop iteration ran at a third of the throughput).
const BATCH: usize = 4;

/// A batch of vectors.
type Batch<S> = [<S as Simd>::f32s; BATCH];

/// `f` applied to every vector of a batch, in source order one step for all four.
macro_rules! each {
    ($v:ident in $batch:expr => $f:expr) => {{
        let mut out = $batch;
        for $v in out.iter_mut() {
            *$v = $f;
        }
        out
    }};
}

/// [`exp`] on a batch of vectors, written with `pulp`'s SIMD operations (fused
/// multiply-adds where the CPU has them), for loops that must not leave a scalar
/// remainder: a 48-column row of a convolution's output is one 32-wide vector loop
/// iteration and sixteen scalar `exp`s when LLVM vectorises [`exp`] itself.
#[inline(always)]
fn exp_batch<S: Simd>(s: S, x: Batch<S>) -> Batch<S> {
    use expf::*;
    // `max(LO, x)` keeps a NaN `x` (x86's max returns its second operand on NaN).
    let xc = each!(v in x => s.min_f32s(s.splat_f32s(HI), s.max_f32s(s.splat_f32s(LO), *v)));
    let (n, p) = exp_reduced(s, xc);
    // 2^n as in `exp`, the top case (n = 128) as 2^127 * 2.
    let mut y = p;
    for i in 0..BATCH {
        let n_lo = s.min_f32s(n[i], s.splat_f32s(127.0));
        let top = s.add_f32s(s.sub_f32s(n[i], n_lo), s.splat_f32s(1.0));
        y[i] = s.mul_f32s(s.mul_f32s(p[i], power_of_two(s, n_lo)), top);
    }
    for i in 0..BATCH {
        let y_hi = s.select_f32s(
            s.greater_than_f32s(x[i], s.splat_f32s(HI)),
            s.splat_f32s(f32::INFINITY),
            y[i],
        );
        y[i] = s.select_f32s(
            s.less_than_f32s(x[i], s.splat_f32s(LO)),
            s.splat_f32s(0.0),
            y_hi,
        );
    }
    y
}

/// Largest finite result of [`exp_batch_logistic`]: `e^88` is finite and its `n` is 127.
const LOGISTIC_HI: f32 = 88.0;

/// [`exp_batch`] for the logistic functions (`1 / (1 + e^x)`, `x / (1 + e^x)`): `e^LO`
/// below `LO` instead of 0, and infinity from 88 on instead of from 88.72, which
/// change those functions only below the smallest normal float, and leave out the
/// top case and a select (6 of 30 operations a vector in Swish). NaN stays NaN.
#[inline(always)]
fn exp_batch_logistic<S: Simd>(s: S, x: Batch<S>) -> Batch<S> {
    let xc = each!(v in x => s.min_f32s(s.splat_f32s(LOGISTIC_HI), s.max_f32s(s.splat_f32s(expf::LO), *v)));
    let (n, p) = exp_reduced(s, xc);
    let mut y = p;
    for i in 0..BATCH {
        let e = s.mul_f32s(p[i], power_of_two(s, n[i]));
        // Infinity past the top keeps `-inf · sigmoid(-inf)` NaN, as in the graph.
        y[i] = s.select_f32s(
            s.greater_than_f32s(x[i], s.splat_f32s(LOGISTIC_HI)),
            s.splat_f32s(f32::INFINITY),
            e,
        );
    }
    y
}

/// For `xc` in `[LO, HI]`: `n = round(xc / ln 2)` and `p = e^r`, where
/// `xc = n ln 2 + r` (Cephes' reduction and polynomial, as in [`exp`]).
#[inline(always)]
fn exp_reduced<S: Simd>(s: S, xc: Batch<S>) -> (Batch<S>, Batch<S>) {
    use expf::*;
    // Round to nearest by adding and subtracting 1.5 * 2^23.
    let round = s.splat_f32s(1.5 * TWO_23);
    let n = each!(v in xc => s.sub_f32s(s.mul_add_e_f32s(*v, s.splat_f32s(LOG2E), round), round));
    let mut r = xc;
    for i in 0..BATCH {
        r[i] = s.mul_add_e_f32s(n[i], s.splat_f32s(-LN2_HI), r[i]);
    }
    for i in 0..BATCH {
        r[i] = s.mul_add_e_f32s(n[i], s.splat_f32s(-LN2_LO), r[i]);
    }
    let mut p = [s.splat_f32s(POLY[0]); BATCH];
    for &k in &POLY[1..] {
        for i in 0..BATCH {
            p[i] = s.mul_add_e_f32s(p[i], r[i], s.splat_f32s(k));
        }
    }
    for i in 0..BATCH {
        let r2 = s.mul_f32s(r[i], r[i]);
        p[i] = s.add_f32s(s.mul_add_e_f32s(p[i], r2, r[i]), s.splat_f32s(1.0));
    }
    (n, p)
}

/// `2^n` for an integer-valued `n` in `[-126, 127]`, from its biased exponent
/// `n + 127`, without a float-to-int conversion.
#[inline(always)]
fn power_of_two<S: Simd>(s: S, n: S::f32s) -> S::f32s {
    let biased = s.transmute_u32s_f32s(s.add_f32s(n, s.splat_f32s(127.0 + expf::TWO_23)));
    s.transmute_f32s_u32s(s.wrapping_dyn_shl_u32s(biased, s.splat_u32s(23)))
}

/// The maps with a vector form: the transcendental activations, whose scalar
/// remainder on a short row costs as much as the vector loop.
#[derive(Debug, Clone, Copy)]
pub(crate) enum VectorMap {
    Exp,
    Sigmoid,
    /// `x · sigmoid(alpha · x)`.
    Swish {
        alpha: f32,
    },
}

/// `y = f(x + bias)` elementwise (`x` is `None` when it is `y` itself), in batches of
/// vectors, the last one loaded and stored masked.
pub(crate) fn map_vectors(f: VectorMap, bias: f32, x: Option<&[f32]>, y: &mut [f32]) {
    if let Some(x) = x {
        assert_eq!(x.len(), y.len(), "map_vectors: lengths");
    }
    dispatch_wide(MapVectors { f, bias, x, y });
}

struct MapVectors<'a> {
    f: VectorMap,
    bias: f32,
    x: Option<&'a [f32]>,
    y: &'a mut [f32],
}

impl WithSimd for MapVectors<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, s: S) {
        let MapVectors { f, bias, x, y } = self;
        let one = s.splat_f32s(1.0);
        match f {
            VectorMap::Exp => map_batches(
                s,
                bias,
                x,
                y,
                #[inline(always)]
                |v| exp_batch(s, v),
            ),
            VectorMap::Sigmoid => map_batches(
                s,
                bias,
                x,
                y,
                #[inline(always)]
                |v| {
                    let e = exp_batch_logistic(s, each!(u in v => s.neg_f32s(*u)));
                    each!(u in e => s.div_f32s(one, s.add_f32s(one, *u)))
                },
            ),
            VectorMap::Swish { alpha } => {
                let minus_alpha = s.splat_f32s(-alpha);
                map_batches(
                    s,
                    bias,
                    x,
                    y,
                    #[inline(always)]
                    |v| {
                        let e = exp_batch_logistic(s, each!(u in v => s.mul_f32s(minus_alpha, *u)));
                        let mut out = v;
                        for i in 0..BATCH {
                            out[i] = s.div_f32s(v[i], s.add_f32s(one, e[i]));
                        }
                        out
                    },
                )
            }
        }
    }
}

#[inline(always)]
fn map_batches<S: Simd>(
    s: S,
    bias: f32,
    x: Option<&[f32]>,
    y: &mut [f32],
    f: impl Fn(Batch<S>) -> Batch<S>,
) {
    let lanes = S::F32_LANES;
    let width = BATCH * lanes;
    let bias = s.splat_f32s(bias);
    let full = y.len() - y.len() % width;
    let (y_full, y_tail) = y.split_at_mut(full);
    let x_tail = x.map(|x| &x[full..]);
    for (at, out) in y_full.chunks_exact_mut(width).enumerate() {
        let source = x.map(|x| &x[at * width..][..width]);
        let (vectors, _) = S::as_simd_f32s(source.unwrap_or(out));
        let batch = std::array::from_fn(|i| s.add_f32s(vectors[i], bias));
        let (out, _) = S::as_mut_simd_f32s(out);
        out[..BATCH].copy_from_slice(&f(batch));
    }
    if y_tail.is_empty() {
        return;
    }
    // The last, partial batch: up to BATCH vectors, each loaded masked (zero past the
    // end) and stored masked.
    let source = x_tail.unwrap_or(y_tail);
    let part = |i: usize| (i * lanes).min(source.len())..((i + 1) * lanes).min(source.len());
    let batch = std::array::from_fn(|i| s.add_f32s(s.partial_load_f32s(&source[part(i)]), bias));
    let result = f(batch);
    for (i, v) in result.into_iter().enumerate() {
        let range = (i * lanes).min(y_tail.len())..((i + 1) * lanes).min(y_tail.len());
        s.partial_store_f32s(&mut y_tail[range], v);
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

/// A reduction with eight independent accumulators (so that it vectorises, or at
/// least overlaps, instead of running as one chain of dependent steps), combined with
/// `merge` at the end; the elements past the last eight fold into the result after.
#[inline(always)]
pub(crate) fn fold8<T: Copy, A: Copy>(
    x: &[T],
    init: A,
    step: impl Fn(A, T) -> A,
    merge: impl Fn(A, A) -> A,
) -> A {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPUID decoding agrees with the kernel's own reading of the CPU: Zen 4
    /// (AMD, family 25 with AVX-512) is the one CPU with sixteen lanes at half rate.
    #[test]
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    fn half_rate_sixteen_lanes_only_on_zen4() {
        let info = std::fs::read_to_string("/proc/cpuinfo").expect("/proc/cpuinfo");
        let field = |name: &str| {
            info.lines()
                .find(|l| l.split(':').next().is_some_and(|k| k.trim() == name))
                .and_then(|l| l.split(':').nth(1))
                .map(str::trim)
                .expect("a field of /proc/cpuinfo")
        };
        let zen4 = field("vendor_id") == "AuthenticAMD" && field("cpu family") == "25";
        assert_eq!(super::zen4(), zen4);
        assert_eq!(full_rate_sixteen_lanes(), sixteen_lanes() && !zen4);
        NARROW_ONLY.set(true);
        assert!(!full_rate_sixteen_lanes(), "at eight lanes");
        NARROW_ONLY.set(false);
    }

    /// The vector maps give the same bits at sixteen lanes and at eight (each lane
    /// goes through the same operations), the masked last batch included.
    #[test]
    fn vector_maps_agree_at_both_widths() {
        let specials = [
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            88.5,
            -88.5,
            1e-40,
        ];
        let x: Vec<f32> = (0..203)
            .map(|i| (i as f32 - 100.0) * 0.9)
            .chain(specials)
            .collect();
        let maps = [
            VectorMap::Exp,
            VectorMap::Sigmoid,
            VectorMap::Swish { alpha: 1.0 },
            VectorMap::Swish { alpha: -0.5 },
        ];
        for f in maps {
            for len in [x.len(), 7, 40, 77] {
                let [wide, narrow] = at_both_widths(|| {
                    let mut y = vec![0.0; len];
                    map_vectors(f, 0.25, Some(&x[..len]), &mut y);
                    y
                });
                for (i, (w, n)) in wide.iter().zip(&narrow).enumerate() {
                    let same = w.to_bits() == n.to_bits() || (w.is_nan() && n.is_nan());
                    assert!(same, "{f:?}, length {len}, [{i}]: {w} against {n}");
                }
            }
        }
    }
}
