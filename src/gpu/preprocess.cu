// Frame -> one row of the model's input tensor, following the definition in src/preprocess.rs with
// the same f32 operations in the same order as the CPU implementation. It is compiled with
// --fmad=false: Rust never contracts a*b+c into one fused multiply-add, so neither may we, and the
// two stay bit-identical instead of drifting by rounding.
//
// Two kernels per (input format, layout, dtype), under plain C names so the host can load them
// without NVRTC name expressions:
//
// - `resample_*` (antialias, the default filter): one block turns a tile of 32 x `tile_rows` output
//   pixels into tensor values in three phases. (A) The source pixels under the tile's tap windows
//   are converted to RGB once and staged in shared memory. (B) The horizontal pass mixes them into
//   one value per (source row, content column), also in shared memory. (C) The vertical pass mixes
//   those into output pixels. The sums run over the same taps in the same order as the
//   definition's `sum over ky of wy * (sum over kx of wx * q)`, so the result is bit-identical to
//   the single-pass form while each source pixel is converted once instead of once per tap of
//   every output pixel that reads it.
// - `preprocess_*` (bilinear, and antialias when a tile's source window does not fit in shared
//   memory): one thread per output pixel, taps read straight from the frame. Bilinear computes its
//   two taps per axis in place, with the same f32 operations as `AxisTaps::bilinear`.
//
// Antialias taps come from per-axis tables that the host builds with the CPU code once per frame
// size, so the weights are the very same f32 numbers. The host trims zero weights off both ends of
// every window: the definition adds `0 * q = +0` there (all weights and pixel values are >= 0),
// which changes no sum.
//
// A launch writes one [C, H, W] or [H, W, C] tensor at `dst`; batched tensors get one launch per
// row, each with the address of its row.
//
// The source is `src_w` x `src_h` pixels whose rows lie `src_pitch` pixels apart: the whole frame,
// or a region of interest in it (`src` its first pixel, `chroma` its first NV12 chroma row; the
// host starts regions on the chroma grid, so every pixel converts as it does in the whole frame).

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

// Output pixels per resample tile row; the block is one warp wide.
#define TILE_W 32
#define BLOCK_ROWS 8
#define BLOCK_THREADS (TILE_W * BLOCK_ROWS)
// Source rows each thread of the horizontal pass mixes per weight load (mix_rows<1..4>).
#define H_ROWS 4
// The tap count whose sums phases B and C unroll at compile time: every window of a 3x shrink
// (scale 3, support 3, the zero tap trimmed), such as 1080p -> 640x360; other counts loop.
#define FIXED_TAPS 5
// Resample blocks resident per multiprocessor that the register budget must allow (48 registers).
#define RESAMPLE_BLOCKS_PER_SM 5
// Source rows each warp of the staging phase loads before converting any: with 8 warps, 4 cover
// the 26 rows of the reference case's tiles in one round.
#define STAGE_LOADS 4

// Mirrors `KernelParams` in src/gpu/preprocessor.rs field for field.
struct Params {
    const unsigned char* src;
    void* dst;
    // One tap record per content column: first source x, tap count, then `x_stride` f32 weights
    // (as bits), `x_stride + 2` words in all.
    const unsigned int* x_taps;
    // The same per content row.
    const unsigned int* y_taps;
    // NV12: the chroma row of the source's first row pair (the source is a region of a frame whose
    // rows are `src_pitch` pixels apart; `src` is its first pixel).
    const unsigned char* chroma;
    // The source (the frame, or a region of interest in it) is src_w x src_h pixels.
    int src_w, src_h;
    int src_pitch;
    int out_w, out_h;
    int content_w, content_h;
    int pad_x, pad_y;
    int x_stride, y_stride;
    float mean[3];
    float std[3];
    // The pad pixel after steps 3 and 4, in output channel order (the host computes it with the
    // same f32 operations).
    float pad_value[3];
    int swap_out;
    int antialias;
    // Resample kernel: output rows per tile, and the shared-memory layout the host sized for the
    // largest tile: `stage_rows` source rows of `stage_pitch` RGB pixels.
    int tile_rows;
    int stage_rows;
    int stage_pitch;
};

struct Rgb {
    float r, g, b;
};

// fminf(fmaxf(x, 0), 255). On sm_90+ one DPX instruction on the bit pattern does it: a negative
// float is a negative int and a non-negative one compares as its bits do, so
// max(min(bits, bits(255)), 0) is the clamp for every x the conversions produce (finite, never
// -0.0).
__device__ __forceinline__ float clamp255(float x) {
#if __CUDA_ARCH__ >= 900
    int clamped;
    asm("min.relu.s32 %0, %1, %2;" : "=r"(clamped) : "r"(__float_as_int(x)), "r"(0x437F0000));
    return __int_as_float(clamped);
#else
    return fminf(fmaxf(x, 0.0f), 255.0f);
#endif
}

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

// Byte `index` of `word` minus `offset` as f32, exactly `(float)byte - offset`: the byte becomes the
// low mantissa bits of 2^23 (one byte permute instead of a shift, a mask and a conversion), and
// subtracting 2^23 + offset is exact for these small integers.
__device__ __forceinline__ float byte_minus(unsigned int word, unsigned int index, float offset) {
    return __uint_as_float(__byte_perm(word, 0x4B000000u, 0x7440u | index)) - (8388608.0f + offset);
}

// Two pixels sharing one chroma pair, from the bytes of one word: the chroma products are computed
// once, with the same operations as `yuv_to_rgb`, so each pixel gets the very same values.
__device__ __forceinline__ void yuv_pair_to_rgb(unsigned int word, unsigned int y0, unsigned int y1, unsigned int u,
                                                unsigned int v, Rgb& p0, Rgb& p1) {
    float d = byte_minus(word, u, 128.0f);
    float e = byte_minus(word, v, 128.0f);
    float re = 1.596f * e, gd = 0.392f * d, ge = 0.813f * e, bd = 2.017f * d;
    float c0 = 1.164f * byte_minus(word, y0, 16.0f);
    float c1 = 1.164f * byte_minus(word, y1, 16.0f);
    p0.r = clamp255(c0 + re);
    p0.g = clamp255(c0 - gd - ge);
    p0.b = clamp255(c0 + bd);
    p1.r = clamp255(c1 + re);
    p1.g = clamp255(c1 - gd - ge);
    p1.b = clamp255(c1 + bd);
}

template <int FMT>
__device__ __forceinline__ Rgb load_rgb(const Params& p, int x, int y) {
    const unsigned char* s = p.src;
    Rgb q;
    if constexpr (FMT == FMT_RGB) {
        const unsigned char* px = s + ((size_t)y * p.src_pitch + x) * 3;
        q.r = px[0]; q.g = px[1]; q.b = px[2];
    } else if constexpr (FMT == FMT_BGR) {
        const unsigned char* px = s + ((size_t)y * p.src_pitch + x) * 3;
        q.r = px[2]; q.g = px[1]; q.b = px[0];
    } else if constexpr (FMT == FMT_RGBA) {
        uchar4 px = *reinterpret_cast<const uchar4*>(s + ((size_t)y * p.src_pitch + x) * 4);
        q.r = px.x; q.g = px.y; q.b = px.z;
    } else if constexpr (FMT == FMT_YUYV) {
        // One aligned 4-byte load holds Y0 U Y1 V of the pixel's pair.
        uchar4 pair = *reinterpret_cast<const uchar4*>(s + (size_t)y * p.src_pitch * 2 + (x & ~1) * 2);
        q = yuv_to_rgb((x & 1) ? pair.z : pair.x, pair.y, pair.w);
    } else {
        const unsigned char* luma = s + (size_t)y * p.src_pitch;
        const unsigned char* chroma = p.chroma + (size_t)(y / 2) * p.src_pitch + (x & ~1);
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

__device__ __forceinline__ void pad_pixel(const Params& p, float out[3]) {
    out[0] = p.pad_value[0];
    out[1] = p.pad_value[1];
    out[2] = p.pad_value[2];
}

template <int FMT, int DTYPE>
__device__ __forceinline__ void output_pixel(const Params& p, int ox, int oy, float out[3]) {
    int cx = ox - p.pad_x;
    int cy = oy - p.pad_y;
    if (cx < 0 || cx >= p.content_w || cy < 0 || cy >= p.content_h) {
        pad_pixel(p, out);
        return;
    }
    Rgb v;
    if (!p.antialias) {
        int x0, x1, y0, y1;
        float fx, fy;
        axis_tap(cx, p.src_w, p.content_w, x0, x1, fx);
        axis_tap(cy, p.src_h, p.content_h, y0, y1, fy);
        Rgb above = mix(load_rgb<FMT>(p, x0, y0), load_rgb<FMT>(p, x1, y0), fx);
        Rgb below = mix(load_rgb<FMT>(p, x0, y1), load_rgb<FMT>(p, x1, y1), fx);
        v = mix(above, below, fy);
    } else {
        const unsigned int* x_record = p.x_taps + (size_t)cx * (p.x_stride + 2);
        const unsigned int* y_record = p.y_taps + (size_t)cy * (p.y_stride + 2);
        int x0 = x_record[0], nx = x_record[1];
        int y0 = y_record[0], ny = y_record[1];
        const float* wx = reinterpret_cast<const float*>(x_record + 2);
        const float* wy = reinterpret_cast<const float*>(y_record + 2);
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

// Step 5 for one output pixel.
template <int LAYOUT, int DTYPE>
__device__ __forceinline__ void store_pixel(const Params& p, int ox, int oy, const float v[3]) {
    size_t pixel = (size_t)oy * p.out_w + ox;
    if constexpr (LAYOUT == LAYOUT_NCHW) {
        size_t plane = (size_t)p.out_w * p.out_h;
#pragma unroll
        for (int c = 0; c < 3; ++c) {
            store<DTYPE>(p.dst, c * plane + pixel, v[c]);
        }
    } else {
#pragma unroll
        for (int c = 0; c < 3; ++c) {
            store<DTYPE>(p.dst, pixel * 3 + c, v[c]);
        }
    }
}

template <int FMT, int LAYOUT, int DTYPE>
__device__ __forceinline__ void preprocess(const Params& p) {
    int ox = blockIdx.x * blockDim.x + threadIdx.x;
    int oy = blockIdx.y * blockDim.y + threadIdx.y;
    if (ox >= p.out_w || oy >= p.out_h) {
        return;
    }
    float v[3];
    output_pixel<FMT, DTYPE>(p, ox, oy, v);
    store_pixel<LAYOUT, DTYPE>(p, ox, oy, v);
}

// ---- resample kernel ----

// Phase A works on chunks of 4 source pixels of one row, starting at a multiple of 4. The raw
// bytes of a chunk (8 for YUYV and NV12, 12 for RGB/BGR, 16 for RGBA) are loaded first, for several
// chunks at once, so their memory latencies overlap; pixels past the frame's right edge are not
// read. `row` is the first byte of source row y.
template <int FMT>
__device__ __forceinline__ uint4 load_chunk(const Params& p, const unsigned char* row, int x, int y) {
    uint4 raw = make_uint4(0, 0, 0, 0);
    if constexpr (FMT == FMT_YUYV) {
        // Two words Y0 U Y1 V; x is even and rows hold whole pairs, so both are 4-byte aligned.
        const unsigned int* pairs = reinterpret_cast<const unsigned int*>(row) + x / 2;
        raw.x = __ldg(pairs);
        if (x + 2 < p.src_w) {
            raw.y = __ldg(pairs + 1);
        }
    } else if constexpr (FMT == FMT_NV12) {
        // Per pair a word Y0 Y1 U V.
        const unsigned char* luma = row + x;
        const unsigned short* chroma = reinterpret_cast<const unsigned short*>(
            p.chroma + (size_t)(y / 2) * p.src_pitch + x);
        raw.x = (unsigned int)__ldg(luma) | ((unsigned int)__ldg(luma + 1) << 8) | ((unsigned int)__ldg(chroma) << 16);
        if (x + 2 < p.src_w) {
            raw.y = (unsigned int)__ldg(luma + 2) | ((unsigned int)__ldg(luma + 3) << 8) |
                    ((unsigned int)__ldg(chroma + 1) << 16);
        }
    } else if constexpr (FMT == FMT_RGBA) {
        const unsigned int* px = reinterpret_cast<const unsigned int*>(row) + x;
        raw.x = __ldg(px);
        if (x + 1 < p.src_w) raw.y = __ldg(px + 1);
        if (x + 2 < p.src_w) raw.z = __ldg(px + 2);
        if (x + 3 < p.src_w) raw.w = __ldg(px + 3);
    } else {
        // RGB/BGR rows need not be word-aligned: bytes.
        const unsigned char* px = row + 3 * x;
        const int bytes = 3 * min(4, p.src_w - x);
        unsigned int words[3] = {0, 0, 0};
#pragma unroll
        for (int i = 0; i < 12; ++i) {
            if (i < bytes) {
                words[i / 4] |= (unsigned int)__ldg(px + i) << (8 * (i % 4));
            }
        }
        raw = make_uint4(words[0], words[1], words[2], 0);
    }
    return raw;
}

__device__ __forceinline__ unsigned int byte_of(uint4 raw, int i) {
    unsigned int word = i < 4 ? raw.x : i < 8 ? raw.y : i < 12 ? raw.z : raw.w;
    return (word >> (8 * (i % 4))) & 0xFF;
}

// Converts a loaded chunk and stores its pixels as RGB floats at `px` (16-byte aligned: the host
// makes `stage_pitch` a multiple of 4): three 16-byte stores when the whole chunk is inside the
// frame, else one float per channel of the pixels inside.
template <int FMT>
__device__ __forceinline__ void stage_chunk(const Params& p, uint4 raw, int x, float* px) {
    Rgb q[4];
    if constexpr (FMT == FMT_YUYV) {
        yuv_pair_to_rgb(raw.x, 0, 2, 1, 3, q[0], q[1]);
        yuv_pair_to_rgb(raw.y, 0, 2, 1, 3, q[2], q[3]);
    } else if constexpr (FMT == FMT_NV12) {
        yuv_pair_to_rgb(raw.x, 0, 1, 2, 3, q[0], q[1]);
        yuv_pair_to_rgb(raw.y, 0, 1, 2, 3, q[2], q[3]);
    } else {
        const int size = FMT == FMT_RGBA ? 4 : 3;
        const int r = FMT == FMT_BGR ? 2 : 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            q[k].r = (float)byte_of(raw, size * k + r);
            q[k].g = (float)byte_of(raw, size * k + 1);
            q[k].b = (float)byte_of(raw, size * k + 2 - r);
        }
    }
    if (x + 4 <= p.src_w) {
        float4* out = reinterpret_cast<float4*>(px);
        out[0] = make_float4(q[0].r, q[0].g, q[0].b, q[1].r);
        out[1] = make_float4(q[1].g, q[1].b, q[2].r, q[2].g);
        out[2] = make_float4(q[2].b, q[3].r, q[3].g, q[3].b);
    } else {
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            if (x + k < p.src_w) {
                px[3 * k] = q[k].r;
                px[3 * k + 1] = q[k].g;
                px[3 * k + 2] = q[k].b;
            }
        }
    }
}

__device__ __forceinline__ int row_bytes(const Params& p, int format) {
    return format == FMT_YUYV ? 2 * p.src_pitch : format == FMT_RGBA ? 4 * p.src_pitch : format == FMT_NV12 ? p.src_pitch : 3 * p.src_pitch;
}

// Phase B for one content column and G staged rows r0, r0 + BLOCK_ROWS, ...: the definition's
// horizontal sum over the column's taps (in increasing k; the first term is the sum `0 + w0 * q0`
// itself, exact since every term is >= +0), stored as the row's mixed value. TAPS > 0 is the tap
// count known at compile time (the loop unrolls, every address is a constant offset); 0 reads it
// from `nx`.
template <int G, int TAPS>
__device__ __forceinline__ void mix_rows(const float* column, float* out, int r0, int stage_row, const float* wx,
                                         int nx) {
    const int taps = TAPS > 0 ? TAPS : nx;
    const float* src[G];
    float acc[G][3];
    const float w0 = wx[0];
#pragma unroll
    for (int g = 0; g < G; ++g) {
        src[g] = column + (r0 + g * BLOCK_ROWS) * stage_row;
        acc[g][0] = w0 * src[g][0];
        acc[g][1] = w0 * src[g][1];
        acc[g][2] = w0 * src[g][2];
    }
    for (int k = 1; k < taps; ++k) {
        const float weight = wx[k];
#pragma unroll
        for (int g = 0; g < G; ++g) {
            src[g] += 3;
            acc[g][0] = acc[g][0] + weight * src[g][0];
            acc[g][1] = acc[g][1] + weight * src[g][1];
            acc[g][2] = acc[g][2] + weight * src[g][2];
        }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
        float* h = out + (r0 + g * BLOCK_ROWS) * TILE_W * 3;
        h[0] = acc[g][0];
        h[1] = acc[g][1];
        h[2] = acc[g][2];
    }
}

// Phase B for one content column: warp `ty` takes staged rows ty, ty + BLOCK_ROWS, ..., up to
// H_ROWS of them per weight load.
template <int TAPS>
__device__ __forceinline__ void mix_column(const float* column, float* out, int ty, int rows, int stage_row,
                                           const float* wx, int nx) {
    for (int r0 = ty; r0 < rows; r0 += BLOCK_ROWS * H_ROWS) {
        // Warp-uniform: rows past the window are not computed.
        switch (min(H_ROWS, (rows - r0 + BLOCK_ROWS - 1) / BLOCK_ROWS)) {
        case 4: mix_rows<4, TAPS>(column, out, r0, stage_row, wx, nx); break;
        case 3: mix_rows<3, TAPS>(column, out, r0, stage_row, wx, nx); break;
        case 2: mix_rows<2, TAPS>(column, out, r0, stage_row, wx, nx); break;
        default: mix_rows<1, TAPS>(column, out, r0, stage_row, wx, nx); break;
        }
    }
}

// Phase C's vertical sum for one output pixel over `ny` mixed rows from `h` (first term as in
// phase B); TAPS as in mix_rows.
template <int TAPS>
__device__ __forceinline__ Rgb mix_column_down(const float* h, const float* wy, int ny) {
    const int taps = TAPS > 0 ? TAPS : ny;
    Rgb sum;
    sum.r = wy[0] * h[0];
    sum.g = wy[0] * h[1];
    sum.b = wy[0] * h[2];
    for (int k = 1; k < taps; ++k) {
        h += TILE_W * 3;
        const float w = wy[k];
        sum.r = sum.r + w * h[0];
        sum.g = sum.g + w * h[1];
        sum.b = sum.b + w * h[2];
    }
    return sum;
}

// Shared memory of one resample block, in 4-byte words (the host's `TilePlan::shared_bytes` / 4):
//   stage  [stage_rows][stage_pitch][3]  source RGB
//   mixed  [stage_rows][TILE_W][3]       horizontal sums
//   x taps [TILE_W][x_stride + 2]         tap records of the tile's columns
//   y taps [tile_rows][y_stride + 2]      tap records of its rows
template <int FMT, int LAYOUT, int DTYPE>
__device__ __forceinline__ void resample(const Params& p) {
    extern __shared__ float shared[];
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int tid = ty * TILE_W + tx;
    const int ox0 = blockIdx.x * TILE_W;
    const int oy0 = blockIdx.y * p.tile_rows;
    const int ox = ox0 + tx;

    // The tile's content pixels [cx_lo, cx_lo + columns) x [cy_lo, cy_lo + content_rows).
    const int cx_lo = max(ox0 - p.pad_x, 0);
    const int columns = min(ox0 + TILE_W - p.pad_x, p.content_w) - cx_lo;
    const int cy_lo = max(oy0 - p.pad_y, 0);
    const int content_rows = min(oy0 + p.tile_rows - p.pad_y, p.content_h) - cy_lo;
    const int oy_hi = min(oy0 + p.tile_rows, p.out_h);
    if (columns <= 0 || content_rows <= 0) {
        if (ox < p.out_w) {
            float v[3];
            pad_pixel(p, v);
            for (int oy = oy0 + ty; oy < oy_hi; oy += BLOCK_ROWS) {
                store_pixel<LAYOUT, DTYPE>(p, ox, oy, v);
            }
        }
        return;
    }

    const int x_record = p.x_stride + 2;
    const int y_record = p.y_stride + 2;
    float* stage = shared;
    float* mixed = stage + p.stage_rows * p.stage_pitch * 3;
    unsigned int* x_taps = reinterpret_cast<unsigned int*>(mixed + p.stage_rows * TILE_W * 3);
    unsigned int* y_taps = x_taps + TILE_W * x_record;
    const int stage_row = p.stage_pitch * 3;

    // The source window: taps are monotonic (the host checks), so it runs from the first tap of
    // the first content pixel to the last tap of the last. Read before the records are copied, so
    // that the two reads overlap and phase A's loads wait for one of them, not both.
    const unsigned int* x_last = p.x_taps + (cx_lo + columns - 1) * x_record;
    const unsigned int* y_last = p.y_taps + (cy_lo + content_rows - 1) * y_record;
    const int sx_lo = __ldg(p.x_taps + cx_lo * x_record);
    const int sx_hi = __ldg(x_last) + __ldg(x_last + 1);
    const int sy_lo = __ldg(p.y_taps + cy_lo * y_record);
    const int sy_hi = __ldg(y_last) + __ldg(y_last + 1);
    const int base_x = sx_lo & ~3;
    const int chunks = (sx_hi - base_x + 3) >> 2;
    const int rows = sy_hi - sy_lo;

    // The tile's tap records, into shared memory in one pass (phases B and C read them there, so
    // their latency hides behind phase A).
    {
        const unsigned int* x_from = p.x_taps + cx_lo * x_record;
        const unsigned int* y_from = p.y_taps + cy_lo * y_record;
        const int x_words = columns * x_record;
        const int words = x_words + content_rows * y_record;
        for (int i = tid; i < words; i += BLOCK_THREADS) {
            if (i < x_words) {
                x_taps[i] = __ldg(x_from + i);
            } else {
                y_taps[i - x_words] = __ldg(y_from + (i - x_words));
            }
        }
    }

    // Phase A: every source pixel under the tile's windows, converted once. Warp `ty` takes source
    // rows ty, ty + BLOCK_ROWS, ..., STAGE_LOADS of them at a time (all loads, then all
    // conversions); lane `tx` takes chunks tx, tx + TILE_W, ... of each row. Row and chunk are
    // fixed per warp and lane, so no index is divided or wrapped, and the only predicates are the
    // chunk count (per lane, once) and the row count (the same for the whole warp).
    {
        const int pitch = row_bytes(p, FMT);
        for (int c = tx; c < chunks; c += TILE_W) {
            const int x = base_x + 4 * c;
            float* column = stage + 12 * c;
            for (int r0 = ty; r0 < rows; r0 += BLOCK_ROWS * STAGE_LOADS) {
                uint4 raw[STAGE_LOADS];
#pragma unroll
                for (int u = 0; u < STAGE_LOADS; ++u) {
                    const int y = sy_lo + r0 + u * BLOCK_ROWS;
                    if (r0 + u * BLOCK_ROWS < rows) {
                        raw[u] = load_chunk<FMT>(p, p.src + (unsigned int)(y * pitch), x, y);
                    }
                }
#pragma unroll
                for (int u = 0; u < STAGE_LOADS; ++u) {
                    if (r0 + u * BLOCK_ROWS < rows) {
                        stage_chunk<FMT>(p, raw[u], x, column + (r0 + u * BLOCK_ROWS) * stage_row);
                    }
                }
            }
        }
    }
    __syncthreads();

    // Phase B: horizontal sums for every staged row and content column.
    if (tx < columns) {
        const unsigned int* record = x_taps + tx * x_record;
        const float* column = stage + 3 * ((int)record[0] - base_x);
        const int nx = record[1];
        const float* wx = reinterpret_cast<const float*>(record + 2);
        float* out = mixed + 3 * tx;
        if (nx == FIXED_TAPS) {
            mix_column<FIXED_TAPS>(column, out, ty, rows, stage_row, wx, nx);
        } else {
            mix_column<0>(column, out, ty, rows, stage_row, wx, nx);
        }
    }
    __syncthreads();

    // Phase C: vertical sums (first term as in phase B), steps 3-5.
    if (ox >= p.out_w) {
        return;
    }
    const int hx = ox - p.pad_x - cx_lo;
    const bool content_column = hx >= 0 && hx < columns;
    for (int oy = oy0 + ty; oy < oy_hi; oy += BLOCK_ROWS) {
        const int j = oy - p.pad_y - cy_lo;
        float v[3];
        if (content_column && j >= 0 && j < content_rows) {
            const unsigned int* record = y_taps + j * y_record;
            const int ny = record[1];
            const float* wy = reinterpret_cast<const float*>(record + 2);
            const float* h = mixed + (((int)record[0] - sy_lo) * TILE_W + hx) * 3;
            const Rgb sum = ny == FIXED_TAPS ? mix_column_down<FIXED_TAPS>(h, wy, ny) : mix_column_down<0>(h, wy, ny);
            finish<DTYPE>(p, sum, v);
        } else {
            pad_pixel(p, v);
        }
        store_pixel<LAYOUT, DTYPE>(p, ox, oy, v);
    }
}

#define INSTANTIATE(FMT, FNAME, LAYOUT, LNAME, DTYPE, DNAME)                                          \
    extern "C" __global__ void preprocess_##FNAME##_##LNAME##_##DNAME(Params p) {                     \
        preprocess<FMT, LAYOUT, DTYPE>(p);                                                           \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(BLOCK_THREADS, RESAMPLE_BLOCKS_PER_SM)               \
        resample_##FNAME##_##LNAME##_##DNAME(Params p) {                                             \
        resample<FMT, LAYOUT, DTYPE>(p);                                                             \
    }

#define FOR_DTYPES(FMT, FNAME, LAYOUT, LNAME)                                                         \
    INSTANTIATE(FMT, FNAME, LAYOUT, LNAME, DTYPE_U8, u8)                                              \
    INSTANTIATE(FMT, FNAME, LAYOUT, LNAME, DTYPE_F16, f16)                                            \
    INSTANTIATE(FMT, FNAME, LAYOUT, LNAME, DTYPE_F32, f32)

#define FOR_LAYOUTS(FMT, FNAME)                                                                       \
    FOR_DTYPES(FMT, FNAME, LAYOUT_NCHW, nchw)                                                         \
    FOR_DTYPES(FMT, FNAME, LAYOUT_NHWC, nhwc)

FOR_LAYOUTS(FMT_RGB, rgb)
FOR_LAYOUTS(FMT_BGR, bgr)
FOR_LAYOUTS(FMT_RGBA, rgba)
FOR_LAYOUTS(FMT_YUYV, yuyv)
FOR_LAYOUTS(FMT_NV12, nv12)
