// Frame -> model input tensor, following the definition in src/preprocess.rs with the same f32
// operations in the same order as the CPU implementation. It is compiled with --fmad=false: Rust
// never contracts a*b+c into one fused multiply-add, so neither may we, and the two stay
// bit-identical instead of drifting by rounding.
//
// Step 2: bilinear computes its two taps per axis in place, with the same f32 operations as
// `AxisTaps::bilinear` in src/preprocess.rs. Antialias taps come from per-axis tables that the host
// builds with that same CPU code once per frame size: the weights are the very same f32 numbers,
// and the kernel only sums them in the definition's order.
//
// One thread writes PIX horizontally adjacent output pixels (all three channels). Kernels are
// instantiated per (input format, layout, dtype, PIX) under plain C names, so the host can load
// them without NVRTC name expressions.

#define FMT_RGB 0
#define FMT_BGR 1
#define FMT_RGBA 2
#define FMT_YUYV 3
#define FMT_NV12 4

#define LAYOUT_NCHW 0
#define LAYOUT_NHWC 1

#define DTYPE_U8 0
#define DTYPE_F16 1
#define DTYPE_F32 2

// Mirrors `KernelParams` in src/gpu/preprocess.rs field for field.
struct Params {
    const unsigned char* src;
    void* dst;
    // Per content column: (first source x, tap count); then `x_stride` weights per column.
    const int* x_taps;
    const float* x_weights;
    // The same per content row.
    const int* y_taps;
    const float* y_weights;
    int src_w, src_h;
    int out_w, out_h;
    int content_w, content_h;
    int pad_x, pad_y;
    int x_stride, y_stride;
    float mean[3];
    float std[3];
    float pad;
    int swap_out;
    int antialias;
};

struct Rgb {
    float r, g, b;
};

__device__ __forceinline__ float clamp255(float x) { return fminf(fmaxf(x, 0.0f), 255.0f); }

__device__ __forceinline__ Rgb yuv_to_rgb(unsigned int y, unsigned int u, unsigned int v) {
    float c = 1.164f * ((float)y - 16.0f);
    float d = (float)u - 128.0f;
    float e = (float)v - 128.0f;
    Rgb p;
    p.r = clamp255(c + 1.596f * e);
    p.g = clamp255(c - 0.392f * d - 0.813f * e);
    p.b = clamp255(c + 2.017f * d);
    return p;
}

template <int FMT>
__device__ __forceinline__ Rgb load_rgb(const Params& p, int x, int y) {
    const unsigned char* s = p.src;
    Rgb q;
    if constexpr (FMT == FMT_RGB) {
        const unsigned char* px = s + ((size_t)y * p.src_w + x) * 3;
        q.r = px[0]; q.g = px[1]; q.b = px[2];
    } else if constexpr (FMT == FMT_BGR) {
        const unsigned char* px = s + ((size_t)y * p.src_w + x) * 3;
        q.r = px[2]; q.g = px[1]; q.b = px[0];
    } else if constexpr (FMT == FMT_RGBA) {
        uchar4 px = *reinterpret_cast<const uchar4*>(s + ((size_t)y * p.src_w + x) * 4);
        q.r = px.x; q.g = px.y; q.b = px.z;
    } else if constexpr (FMT == FMT_YUYV) {
        // One aligned 4-byte load holds Y0 U Y1 V of the pixel's pair.
        uchar4 pair = *reinterpret_cast<const uchar4*>(s + (size_t)y * p.src_w * 2 + (x & ~1) * 2);
        q = yuv_to_rgb((x & 1) ? pair.z : pair.x, pair.y, pair.w);
    } else {
        const unsigned char* luma = s + (size_t)y * p.src_w;
        const unsigned char* chroma = s + (size_t)p.src_w * p.src_h + (size_t)(y / 2) * p.src_w + (x & ~1);
        uchar2 uv = *reinterpret_cast<const uchar2*>(chroma);
        q = yuv_to_rgb(luma[x], uv.x, uv.y);
    }
    return q;
}

// Bilinear step 2 along one axis for content pixel i: taps i0, i1 with weights 1 - frac, frac.
__device__ __forceinline__ void axis_tap(int i, int src_len, int content_len, int& i0, int& i1, float& frac) {
    float s = ((float)i + 0.5f) * (float)src_len / (float)content_len - 0.5f;
    s = fminf(fmaxf(s, 0.0f), (float)(src_len - 1));
    float f = floorf(s);
    i0 = (int)f;
    i1 = min(i0 + 1, src_len - 1);
    frac = s - f;
}

// The definition's sums `0 + w0 * a + w1 * b` for two taps; at the last source pixel i1 = i0 and
// frac = 0, where this equals the single tap `0 + 1 * a`.
__device__ __forceinline__ Rgb mix(Rgb a, Rgb b, float frac) {
    Rgb m;
    m.r = (1.0f - frac) * a.r + frac * b.r;
    m.g = (1.0f - frac) * a.g + frac * b.g;
    m.b = (1.0f - frac) * a.b + frac * b.b;
    return m;
}

// Steps 3 (output order) and 4 (value) for float tensors; u8 tensors keep the pixel value.
template <int DTYPE>
__device__ __forceinline__ void finish(const Params& p, Rgb v, float out[3]) {
    float ordered[3];
    if (p.swap_out) {
        ordered[0] = v.b; ordered[1] = v.g; ordered[2] = v.r;
    } else {
        ordered[0] = v.r; ordered[1] = v.g; ordered[2] = v.b;
    }
#pragma unroll
    for (int c = 0; c < 3; ++c) {
        out[c] = DTYPE == DTYPE_U8 ? ordered[c] : (ordered[c] - p.mean[c]) / p.std[c];
    }
}

template <int FMT, int DTYPE>
__device__ __forceinline__ void output_pixel(const Params& p, int ox, int oy, float out[3]) {
    int cx = ox - p.pad_x;
    int cy = oy - p.pad_y;
    Rgb v;
    if (cx < 0 || cx >= p.content_w || cy < 0 || cy >= p.content_h) {
        v.r = v.g = v.b = p.pad;
    } else if (!p.antialias) {
        int x0, x1, y0, y1;
        float fx, fy;
        axis_tap(cx, p.src_w, p.content_w, x0, x1, fx);
        axis_tap(cy, p.src_h, p.content_h, y0, y1, fy);
        Rgb above = mix(load_rgb<FMT>(p, x0, y0), load_rgb<FMT>(p, x1, y0), fx);
        Rgb below = mix(load_rgb<FMT>(p, x0, y1), load_rgb<FMT>(p, x1, y1), fx);
        v = mix(above, below, fy);
    } else {
        int x0 = p.x_taps[2 * cx], nx = p.x_taps[2 * cx + 1];
        int y0 = p.y_taps[2 * cy], ny = p.y_taps[2 * cy + 1];
        const float* wx = p.x_weights + (size_t)cx * p.x_stride;
        const float* wy = p.y_weights + (size_t)cy * p.y_stride;
        v.r = v.g = v.b = 0.0f;
        for (int ky = 0; ky < ny; ++ky) {
            Rgb h;
            h.r = h.g = h.b = 0.0f;
            for (int kx = 0; kx < nx; ++kx) {
                Rgb q = load_rgb<FMT>(p, x0 + kx, y0 + ky);
                float w = wx[kx];
                h.r = h.r + w * q.r;
                h.g = h.g + w * q.g;
                h.b = h.b + w * q.b;
            }
            float w = wy[ky];
            v.r = v.r + w * h.r;
            v.g = v.g + w * h.g;
            v.b = v.b + w * h.b;
        }
    }
    finish<DTYPE>(p, v, out);
}

__device__ __forceinline__ unsigned short f32_to_f16_bits(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

__device__ __forceinline__ unsigned char f32_to_u8(float f) {
    return (unsigned char)fminf(fmaxf(roundf(f), 0.0f), 255.0f);
}

template <int DTYPE>
__device__ __forceinline__ void store(void* dst, size_t index, float v) {
    if constexpr (DTYPE == DTYPE_U8) {
        static_cast<unsigned char*>(dst)[index] = f32_to_u8(v);
    } else if constexpr (DTYPE == DTYPE_F16) {
        static_cast<unsigned short*>(dst)[index] = f32_to_f16_bits(v);
    } else {
        static_cast<float*>(dst)[index] = v;
    }
}

// Two adjacent elements of one NCHW plane in a single store; `index` is even.
template <int DTYPE>
__device__ __forceinline__ void store_pair(void* dst, size_t index, float a, float b) {
    if constexpr (DTYPE == DTYPE_U8) {
        uchar2 v = make_uchar2(f32_to_u8(a), f32_to_u8(b));
        *reinterpret_cast<uchar2*>(static_cast<unsigned char*>(dst) + index) = v;
    } else if constexpr (DTYPE == DTYPE_F16) {
        unsigned int v = (unsigned int)f32_to_f16_bits(a) | ((unsigned int)f32_to_f16_bits(b) << 16);
        *reinterpret_cast<unsigned int*>(static_cast<unsigned short*>(dst) + index) = v;
    } else {
        *reinterpret_cast<float2*>(static_cast<float*>(dst) + index) = make_float2(a, b);
    }
}

template <int FMT, int LAYOUT, int DTYPE, int PIX>
__device__ __forceinline__ void preprocess(const Params& p) {
    int ox0 = (blockIdx.x * blockDim.x + threadIdx.x) * PIX;
    int oy = blockIdx.y * blockDim.y + threadIdx.y;
    if (ox0 >= p.out_w || oy >= p.out_h) {
        return;
    }
    float px[PIX][3];
#pragma unroll
    for (int k = 0; k < PIX; ++k) {
        if (ox0 + k < p.out_w) {
            output_pixel<FMT, DTYPE>(p, ox0 + k, oy, px[k]);
        }
    }
    size_t row = (size_t)oy * p.out_w;
    if constexpr (LAYOUT == LAYOUT_NCHW) {
        size_t plane = (size_t)p.out_w * p.out_h;
        if (PIX == 2 && ox0 + 1 < p.out_w && (p.out_w & 1) == 0) {
#pragma unroll
            for (int c = 0; c < 3; ++c) {
                store_pair<DTYPE>(p.dst, c * plane + row + ox0, px[0][c], px[PIX - 1][c]);
            }
        } else {
#pragma unroll
            for (int k = 0; k < PIX; ++k) {
                if (ox0 + k < p.out_w) {
#pragma unroll
                    for (int c = 0; c < 3; ++c) {
                        store<DTYPE>(p.dst, c * plane + row + ox0 + k, px[k][c]);
                    }
                }
            }
        }
    } else {
#pragma unroll
        for (int k = 0; k < PIX; ++k) {
            if (ox0 + k < p.out_w) {
#pragma unroll
                for (int c = 0; c < 3; ++c) {
                    store<DTYPE>(p.dst, (row + ox0 + k) * 3 + c, px[k][c]);
                }
            }
        }
    }
}

#define INSTANTIATE(FMT, FNAME, LAYOUT, LNAME, DTYPE, DNAME, PIX)                                     \
    extern "C" __global__ void preprocess_##FNAME##_##LNAME##_##DNAME##_x##PIX(Params p) {          \
        preprocess<FMT, LAYOUT, DTYPE, PIX>(p);                                                      \
    }

#define FOR_DTYPES(FMT, FNAME, LAYOUT, LNAME, PIX)                                                    \
    INSTANTIATE(FMT, FNAME, LAYOUT, LNAME, DTYPE_U8, u8, PIX)                                         \
    INSTANTIATE(FMT, FNAME, LAYOUT, LNAME, DTYPE_F16, f16, PIX)                                       \
    INSTANTIATE(FMT, FNAME, LAYOUT, LNAME, DTYPE_F32, f32, PIX)

#define FOR_LAYOUTS(FMT, FNAME, PIX)                                                                  \
    FOR_DTYPES(FMT, FNAME, LAYOUT_NCHW, nchw, PIX)                                                    \
    FOR_DTYPES(FMT, FNAME, LAYOUT_NHWC, nhwc, PIX)

#define FOR_FORMATS(PIX)                                                                              \
    FOR_LAYOUTS(FMT_RGB, rgb, PIX)                                                                    \
    FOR_LAYOUTS(FMT_BGR, bgr, PIX)                                                                    \
    FOR_LAYOUTS(FMT_RGBA, rgba, PIX)                                                                  \
    FOR_LAYOUTS(FMT_YUYV, yuyv, PIX)                                                                  \
    FOR_LAYOUTS(FMT_NV12, nv12, PIX)

FOR_FORMATS(1)
FOR_FORMATS(2)
