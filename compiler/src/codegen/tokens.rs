//! Kernel parameters as Rust constant expressions.

use kiln_runtime::params::*;
use proc_macro2::{Literal, TokenStream};
use quote::quote;

pub fn f32_lit(v: f32) -> TokenStream {
    if v.is_nan() {
        quote!(f32::NAN)
    } else if v == f32::INFINITY {
        quote!(f32::INFINITY)
    } else if v == f32::NEG_INFINITY {
        quote!(f32::NEG_INFINITY)
    } else {
        let l = Literal::f32_suffixed(v);
        quote!(#l)
    }
}

fn us(v: usize) -> Literal {
    Literal::usize_unsuffixed(v)
}

fn arr(v: &[usize]) -> TokenStream {
    let items = v.iter().map(|&x| us(x));
    quote!([#(#items),*])
}

pub fn activation(rt: &TokenStream, a: Activation) -> TokenStream {
    match a {
        Activation::None => quote!(#rt::params::Activation::None),
        Activation::Relu => quote!(#rt::params::Activation::Relu),
        Activation::Sigmoid => quote!(#rt::params::Activation::Sigmoid),
        Activation::HardSwish => quote!(#rt::params::Activation::HardSwish),
        Activation::Swish { alpha } => {
            let alpha = f32_lit(alpha);
            quote!(#rt::params::Activation::Swish { alpha: #alpha })
        }
        Activation::HardSigmoid { alpha, beta } => {
            let (alpha, beta) = (f32_lit(alpha), f32_lit(beta));
            quote!(#rt::params::Activation::HardSigmoid { alpha: #alpha, beta: #beta })
        }
        Activation::LeakyRelu { alpha } => {
            let alpha = f32_lit(alpha);
            quote!(#rt::params::Activation::LeakyRelu { alpha: #alpha })
        }
        Activation::Clip { min, max } => {
            let (min, max) = (f32_lit(min), f32_lit(max));
            quote!(#rt::params::Activation::Clip { min: #min, max: #max })
        }
    }
}

pub fn unary(rt: &TokenStream, u: Unary) -> TokenStream {
    match u {
        Unary::Relu => quote!(#rt::params::Unary::Relu),
        Unary::Sigmoid => quote!(#rt::params::Unary::Sigmoid),
        Unary::Tanh => quote!(#rt::params::Unary::Tanh),
        Unary::Exp => quote!(#rt::params::Unary::Exp),
        Unary::Neg => quote!(#rt::params::Unary::Neg),
        Unary::Abs => quote!(#rt::params::Unary::Abs),
        Unary::Sqrt => quote!(#rt::params::Unary::Sqrt),
        Unary::Erf => quote!(#rt::params::Unary::Erf),
        Unary::HardSwish => quote!(#rt::params::Unary::HardSwish),
        Unary::Swish { alpha } => {
            let alpha = f32_lit(alpha);
            quote!(#rt::params::Unary::Swish { alpha: #alpha })
        }
        Unary::Gelu { tanh } => quote!(#rt::params::Unary::Gelu { tanh: #tanh }),
        Unary::HardSigmoid { alpha, beta } => {
            let (alpha, beta) = (f32_lit(alpha), f32_lit(beta));
            quote!(#rt::params::Unary::HardSigmoid { alpha: #alpha, beta: #beta })
        }
        Unary::LeakyRelu { alpha } => {
            let alpha = f32_lit(alpha);
            quote!(#rt::params::Unary::LeakyRelu { alpha: #alpha })
        }
        Unary::Clip { min, max } => {
            let (min, max) = (f32_lit(min), f32_lit(max));
            quote!(#rt::params::Unary::Clip { min: #min, max: #max })
        }
    }
}

pub fn binary(rt: &TokenStream, b: Binary) -> TokenStream {
    match b {
        Binary::Add => quote!(#rt::params::Binary::Add),
        Binary::Sub => quote!(#rt::params::Binary::Sub),
        Binary::Mul => quote!(#rt::params::Binary::Mul),
        Binary::Div => quote!(#rt::params::Binary::Div),
        Binary::Max => quote!(#rt::params::Binary::Max),
        Binary::Min => quote!(#rt::params::Binary::Min),
    }
}

pub fn conv2d(rt: &TokenStream, p: &Conv2d) -> TokenStream {
    let [n, c_in, h_in, w_in, c_out, h_out, w_out, group] = [
        p.n, p.c_in, p.h_in, p.w_in, p.c_out, p.h_out, p.w_out, p.group,
    ]
    .map(us);
    let (kernel, stride, dilation, pads) = (
        arr(&p.kernel),
        arr(&p.stride),
        arr(&p.dilation),
        arr(&p.pads),
    );
    let act = activation(rt, p.activation);
    quote!(#rt::params::Conv2d {
        n: #n, c_in: #c_in, h_in: #h_in, w_in: #w_in, c_out: #c_out, h_out: #h_out, w_out: #w_out,
        kernel: #kernel, stride: #stride, dilation: #dilation, pads: #pads, group: #group, activation: #act,
    })
}

pub fn winograd(rt: &TokenStream, v: &Winograd) -> TokenStream {
    match v {
        Winograd::F2 => quote!(#rt::params::Winograd::F2),
        Winograd::F4 => quote!(#rt::params::Winograd::F4),
    }
}

pub fn gemm(rt: &TokenStream, p: &Gemm) -> TokenStream {
    let [m, n, k] = [p.m, p.n, p.k].map(us);
    let (ta, tb) = (p.trans_a, p.trans_b);
    let (alpha, beta) = (f32_lit(p.alpha), f32_lit(p.beta));
    let cs = arr(&p.c_strides);
    let act = activation(rt, p.activation);
    quote!(#rt::params::Gemm {
        m: #m, n: #n, k: #k, trans_a: #ta, trans_b: #tb, alpha: #alpha, beta: #beta, c_strides: #cs, activation: #act,
    })
}

pub fn matmul(rt: &TokenStream, p: &MatMul) -> TokenStream {
    let [m, n, k, r] = [p.m, p.n, p.k, p.batch_rank].map(us);
    let (bs, sa, sb) = (
        arr(&p.batch_shape),
        arr(&p.a_batch_strides),
        arr(&p.b_batch_strides),
    );
    quote!(#rt::params::MatMul {
        m: #m, n: #n, k: #k, batch_rank: #r, batch_shape: #bs, a_batch_strides: #sa, b_batch_strides: #sb,
    })
}

pub fn packed_matmul(rt: &TokenStream, p: &PackedMatMul) -> TokenStream {
    let [m, n, k] = [p.m, p.n, p.k].map(us);
    quote!(#rt::params::PackedMatMul { m: #m, n: #n, k: #k })
}

pub fn broadcast(rt: &TokenStream, p: &Broadcast) -> TokenStream {
    let r = us(p.rank);
    let (s, a, b) = (arr(&p.shape), arr(&p.a_strides), arr(&p.b_strides));
    quote!(#rt::params::Broadcast { rank: #r, shape: #s, a_strides: #a, b_strides: #b })
}

pub fn batch_norm(rt: &TokenStream, p: &BatchNorm) -> TokenStream {
    let [n, c, inner] = [p.n, p.c, p.inner].map(us);
    let eps = f32_lit(p.epsilon);
    quote!(#rt::params::BatchNorm { n: #n, c: #c, inner: #inner, epsilon: #eps })
}

pub fn channel_affine(rt: &TokenStream, p: &ChannelAffine) -> TokenStream {
    let [n, c, inner] = [p.n, p.c, p.inner].map(us);
    let act = activation(rt, p.activation);
    quote!(#rt::params::ChannelAffine { n: #n, c: #c, inner: #inner, activation: #act })
}

pub fn pool2d(rt: &TokenStream, p: &Pool2d) -> TokenStream {
    let kind = match p.kind {
        PoolKind::Max => quote!(#rt::params::PoolKind::Max),
        PoolKind::Average { count_include_pad } => {
            quote!(#rt::params::PoolKind::Average { count_include_pad: #count_include_pad })
        }
    };
    let [n, c, h_in, w_in, h_out, w_out] = [p.n, p.c, p.h_in, p.w_in, p.h_out, p.w_out].map(us);
    let (kernel, stride, dilation, pads) = (
        arr(&p.kernel),
        arr(&p.stride),
        arr(&p.dilation),
        arr(&p.pads),
    );
    quote!(#rt::params::Pool2d {
        kind: #kind, n: #n, c: #c, h_in: #h_in, w_in: #w_in, h_out: #h_out, w_out: #w_out,
        kernel: #kernel, stride: #stride, dilation: #dilation, pads: #pads,
    })
}

pub fn reduce_mean(rt: &TokenStream, p: &ReduceMean) -> TokenStream {
    let [outer, inner] = [p.outer, p.inner].map(us);
    quote!(#rt::params::ReduceMean { outer: #outer, inner: #inner })
}

pub fn lrn(rt: &TokenStream, p: &Lrn) -> TokenStream {
    let [n, c, inner, size] = [p.n, p.c, p.inner, p.size].map(us);
    let [alpha, beta, bias] = [p.alpha, p.beta, p.bias].map(f32_lit);
    quote!(#rt::params::Lrn { n: #n, c: #c, inner: #inner, size: #size, alpha: #alpha, beta: #beta, bias: #bias })
}

pub fn softmax(rt: &TokenStream, p: &Softmax) -> TokenStream {
    let [outer, len, inner] = [p.outer, p.len, p.inner].map(us);
    let log = p.log;
    quote!(#rt::params::Softmax { outer: #outer, len: #len, inner: #inner, log: #log })
}

pub fn concat(rt: &TokenStream, p: &Concat) -> TokenStream {
    let outer = us(p.outer);
    quote!(#rt::params::Concat { outer: #outer })
}

pub fn transpose(rt: &TokenStream, p: &Transpose) -> TokenStream {
    let r = us(p.rank);
    let (s, perm) = (arr(&p.in_shape), arr(&p.perm));
    quote!(#rt::params::Transpose { rank: #r, in_shape: #s, perm: #perm })
}
