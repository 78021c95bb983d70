//! Every kernel, called a second time, must not touch the heap.
//!
//! A counting global allocator records allocations made on this test's thread while
//! counting is on. The first round warms up whatever a kernel keeps per thread (faer's
//! thread-local packing buffer, allocated on its first large product); the second
//! round must allocate nothing. The shapes include a convolution through im2col and a
//! Gemm large enough (256 × 1152 × 784, a ResNet-50 3×3 layer) for faer to pack.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use kiln_runtime::kernels::*;
use kiln_runtime::params::*;

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // `const` initialisation: reading it never allocates, even inside the allocator.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

fn note() {
    if COUNTING.with(Cell::get) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every method forwards to the system allocator unchanged; counting only
// touches an atomic and a const-initialised thread-local.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Heap allocations `f` makes on this thread.
fn allocations(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCATIONS.load(Ordering::Relaxed) - before
}

fn arr(s: &[usize]) -> [usize; MAX_RANK] {
    let mut a = [0; MAX_RANK];
    a[..s.len()].copy_from_slice(s);
    a
}

/// All the buffers the kernels read and write, made before counting starts.
struct Buffers {
    x: Vec<f32>,
    w: Vec<f32>,
    bias: Vec<f32>,
    y: Vec<f32>,
    scratch: Vec<f32>,
}

impl Buffers {
    fn new() -> Self {
        let big = 1 << 20;
        Buffers {
            x: (0..big).map(|i| (i % 97) as f32 * 0.01 - 0.4).collect(),
            w: (0..big).map(|i| (i % 89) as f32 * 0.01 - 0.4).collect(),
            bias: vec![0.1; 4096],
            y: vec![0.0; big],
            scratch: vec![0.0; big],
        }
    }
}

fn conv(c_in: usize, c_out: usize, hw: usize, k: usize, stride: usize, group: usize) -> Conv2d {
    let pad = k / 2;
    let out = (hw + 2 * pad - k) / stride + 1;
    Conv2d {
        n: 1,
        c_in,
        h_in: hw,
        w_in: hw,
        c_out,
        h_out: out,
        w_out: out,
        kernel: [k, k],
        stride: [stride, stride],
        dilation: [1, 1],
        pads: [pad; 4],
        group,
        activation: Activation::Relu,
    }
}

/// Calls every kernel once, on shapes that reach each of its strategies.
fn every_kernel(b: &mut Buffers) -> Vec<(&'static str, usize)> {
    let Buffers {
        x,
        w,
        bias,
        y,
        scratch,
    } = b;
    let mut counts = Vec::new();
    let mut count = |name, f: &mut dyn FnMut()| counts.push((name, allocations(f)));

    for (name, p) in [
        ("conv2d im2col 3x3", conv(64, 64, 28, 3, 1, 1)),
        ("conv2d pointwise", conv(64, 256, 28, 1, 1, 1)),
        ("conv2d strided 1x1", conv(64, 128, 28, 1, 2, 1)),
        ("conv2d depthwise", conv(64, 64, 28, 3, 1, 64)),
        ("conv2d grouped", conv(64, 64, 14, 3, 2, 4)),
    ] {
        let xl = p.n * p.c_in * p.h_in * p.w_in;
        let wl = p.c_out * p.c_in / p.group * 9usize.min(p.kernel[0] * p.kernel[1]);
        let yl = p.n * p.c_out * p.h_out * p.w_out;
        count(name, &mut || {
            conv2d(
                &p,
                &x[..xl],
                &w[..wl],
                Some(&bias[..p.c_out]),
                &mut y[..yl],
                &mut scratch[..p.scratch_len()],
            )
        });
    }
    let gemm_big = Gemm {
        m: 256,
        n: 784,
        k: 1152,
        trans_a: false,
        trans_b: false,
        alpha: 1.0,
        beta: 1.0,
        c_strides: [1, 0],
        activation: Activation::Relu,
    };
    count("gemm 256x1152x784", &mut || {
        gemm(
            &gemm_big,
            &x[..256 * 1152],
            &w[..1152 * 784],
            Some(&bias[..256]),
            &mut y[..256 * 784],
        )
    });
    let fc = Gemm {
        m: 1,
        n: 1000,
        k: 1024,
        trans_b: true,
        c_strides: [0, 1],
        ..gemm_big
    };
    count("gemm matvec", &mut || {
        gemm(
            &fc,
            &x[..1024],
            &w[..1024 * 1000],
            Some(&bias[..1000]),
            &mut y[..1000],
        )
    });
    let small = Gemm {
        m: 5,
        n: 7,
        k: 3,
        c_strides: [7, 1],
        ..gemm_big
    };
    count("gemm small", &mut || {
        gemm(&small, &x[..15], &w[..21], Some(&bias[..35]), &mut y[..35])
    });
    let mm = MatMul {
        m: 64,
        n: 48,
        k: 32,
        batch_rank: 2,
        batch_shape: arr(&[2, 3]),
        a_batch_strides: arr(&[3, 1]),
        b_batch_strides: arr(&[0, 1]),
    };
    count("matmul batched", &mut || {
        matmul(
            &mm,
            &x[..6 * 64 * 32],
            &w[..3 * 32 * 48],
            &mut y[..6 * 64 * 48],
        )
    });
    let bn = BatchNorm {
        n: 1,
        c: 64,
        inner: 784,
        epsilon: 1e-5,
    };
    let v = &bias[..64];
    count("batch_norm", &mut || {
        batch_norm(&bn, &x[..64 * 784], v, v, v, v, &mut y[..64 * 784])
    });
    count("batch_norm_inplace", &mut || {
        batch_norm_inplace(&bn, v, v, v, v, &mut y[..64 * 784])
    });
    let affine = ChannelAffine {
        n: 1,
        c: 64,
        inner: 784,
        activation: Activation::Relu,
    };
    count("channel_affine", &mut || {
        channel_affine(&affine, &x[..64 * 784], v, v, &mut y[..64 * 784])
    });
    count("channel_affine_inplace", &mut || {
        channel_affine_inplace(&affine, v, v, &mut y[..64 * 784])
    });
    count("unary", &mut || {
        unary(Unary::Sigmoid, &x[..4096], &mut y[..4096])
    });
    count("unary_inplace", &mut || {
        unary_inplace(Unary::Tanh, &mut y[..4096])
    });
    let bc = Broadcast {
        rank: 3,
        shape: arr(&[64, 28, 28]),
        a_strides: arr(&[784, 28, 1]),
        b_strides: arr(&[1, 0, 0]),
    };
    count("binary", &mut || {
        binary(
            Binary::Add,
            &bc,
            &x[..64 * 784],
            &w[..64],
            &mut y[..64 * 784],
        )
    });
    count("binary_inplace", &mut || {
        binary_inplace(Binary::Mul, &bc, &mut y[..64 * 784], &w[..64])
    });
    let bc_b = Broadcast {
        a_strides: bc.b_strides,
        b_strides: bc.a_strides,
        ..bc
    };
    count("binary_inplace_b", &mut || {
        binary_inplace_b(Binary::Sub, &bc_b, &w[..64], &mut y[..64 * 784])
    });
    for kind in [
        PoolKind::Max,
        PoolKind::Average {
            count_include_pad: false,
        },
    ] {
        let p = Pool2d {
            kind,
            n: 1,
            c: 64,
            h_in: 28,
            w_in: 28,
            h_out: 14,
            w_out: 14,
            kernel: [3, 3],
            stride: [2, 2],
            dilation: [1, 1],
            pads: [1, 1, 0, 0],
        };
        count("pool2d", &mut || {
            pool2d(&p, &x[..64 * 784], &mut y[..64 * 196])
        });
    }
    let rm = ReduceMean {
        outer: 2048,
        inner: 49,
    };
    count("reduce_mean", &mut || {
        reduce_mean(&rm, &x[..2048 * 49], &mut y[..2048])
    });
    let l = Lrn {
        n: 1,
        c: 64,
        inner: 196,
        size: 5,
        alpha: 1e-4,
        beta: 0.75,
        bias: 1.0,
    };
    count("lrn", &mut || lrn(&l, &x[..64 * 196], &mut y[..64 * 196]));
    count("lrn_inplace", &mut || lrn_inplace(&l, &mut y[..64 * 196]));
    for (outer, len, inner) in [(4, 1000, 1), (2, 10, 100)] {
        let s = Softmax {
            outer,
            len,
            inner,
            log: false,
        };
        let n = outer * len * inner;
        count("softmax", &mut || softmax(&s, &x[..n], &mut y[..n]));
        let s = Softmax { log: true, ..s };
        count("log softmax_inplace", &mut || {
            softmax_inplace(&s, &mut y[..n])
        });
    }
    count("concat", &mut || {
        concat(
            &Concat { outer: 4 },
            &[&x[..400], &w[..800]],
            &mut y[..1200],
        )
    });
    let t = Transpose {
        rank: 4,
        in_shape: arr(&[1, 64, 28, 28]),
        perm: arr(&[0, 2, 3, 1]),
    };
    count("transpose", &mut || {
        transpose(&t, &x[..64 * 784], &mut y[..64 * 784])
    });
    count("copy", &mut || copy(&x[..1000], &mut y[..1000]));
    counts
}

#[test]
fn kernels_do_not_allocate_after_warm_up() {
    let mut buffers = Buffers::new();
    let first = every_kernel(&mut buffers);
    let second = every_kernel(&mut buffers);
    let warm_up: usize = first.iter().map(|(_, n)| n).sum();
    println!("allocations during warm-up: {warm_up} ({first:?})");
    let offenders: Vec<_> = second.iter().filter(|(_, n)| *n > 0).collect();
    assert!(
        offenders.is_empty(),
        "kernels allocated after warm-up: {offenders:?}"
    );
}

/// The counter itself works (so a zero above means something).
#[test]
fn counter_sees_allocations() {
    assert_eq!(allocations(|| drop(std::hint::black_box(vec![1u8; 16]))), 1);
}
