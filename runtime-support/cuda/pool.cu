// 2-D max and average pooling over NCHW: one thread per output element.
#include "kiln.cuh"

// Taps of a window (start `o*stride - pad`, `kernel` taps `dilation` apart) that fall
// in 0..len.
__device__ __forceinline__ int kiln_taps_inside(int start, int kernel, int dilation, int len) {
    int n = 0;
    for (int k = 0; k < kernel; ++k) {
        const int p = start + k * dilation;
        n += (p >= 0 && p < len) ? 1 : 0;
    }
    return n;
}

// ints: 0 planes (N*C), 1 H_in, 2 W_in, 3 H_out, 4 W_out, 5 kh, 6 kw, 7 stride h,
//       8 stride w, 9 dilation h, 10 dilation w, 11 pad top, 12 pad left,
//       13 pad bottom, 14 pad right, 15 kind (0 max, 1 average without pads,
//       2 average counting pads)
// inputs: X. A max over a window wholly in the padding is -inf; an average over no
// counted tap is 0. Not in place.
extern "C" __global__ void kiln_pool2d(const KArgs a) {
    const int h_in = a.ints[1], w_in = a.ints[2], h_out = a.ints[3], w_out = a.ints[4];
    const int kh = a.ints[5], kw = a.ints[6], sh = a.ints[7], sw = a.ints[8];
    const int dh = a.ints[9], dw = a.ints[10], pt = a.ints[11], pl = a.ints[12];
    const int pb = a.ints[13], pr = a.ints[14], kind = a.ints[15];
    const long long len = (long long)a.ints[0] * h_out * w_out;
    const float* x = kiln_in(a, 0);
    float* y = kiln_out(a);
    for (long long i = kiln_first(); i < len; i += kiln_stride()) {
        const int idx = (int)i;
        const int ow = idx % w_out, oh = (idx / w_out) % h_out, plane = idx / (w_out * h_out);
        const float* xp = x + plane * h_in * w_in;
        const int ih0 = oh * sh - pt, iw0 = ow * sw - pl;
        float acc = kind == 0 ? kiln_neg_inf() : 0.0f;
        for (int ki = 0; ki < kh; ++ki) {
            const int ih = ih0 + ki * dh;
            if (ih < 0 || ih >= h_in) continue;
            for (int kj = 0; kj < kw; ++kj) {
                const int iw = iw0 + kj * dw;
                if (iw < 0 || iw >= w_in) continue;
                const float v = xp[ih * w_in + iw];
                acc = kind == 0 ? fmaxf(acc, v) : acc + v;
            }
        }
        if (kind != 0) {
            // Taps counted: inside the input, or (kind 2) inside the input and its pads
            // (a ceil_mode window may run past the pads; those taps are not counted).
            const int rows = kind == 1 ? kiln_taps_inside(ih0, kh, dh, h_in)
                                       : kiln_taps_inside(oh * sh, kh, dh, h_in + pt + pb);
            const int cols = kind == 1 ? kiln_taps_inside(iw0, kw, dw, w_in)
                                       : kiln_taps_inside(ow * sw, kw, dw, w_in + pl + pr);
            const int count = rows * cols;
            acc = count == 0 ? 0.0f : acc / (float)count;
        }
        y[idx] = acc;
    }
}
