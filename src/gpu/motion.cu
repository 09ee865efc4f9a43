// Motion: the luma image of a frame, the definition in src/motion/luma.rs computed with the same
// integers (so the bytes are equal to the CPU's, not close). Compiled into the same module as
// preprocess.cu (whose FMT_* constants it uses), after it.
//
// One thread per cell: it sums the luma of the cell's `cell` x `cell` pixels row by row and
// stores the rounded mean. A warp covers 32 neighbouring cells of one cell row, so each of its
// loads reads one stretch of a frame row; every frame byte the grid covers is read once.

// Mirrors `LumaParams` in src/gpu/motion_luma.rs field for field.
struct LumaParams {
    const unsigned char* src;
    unsigned char* dst;
    // Bytes from one frame row to the next.
    int row_bytes;
    // A cell's side in pixels, and the grid's cells across and down.
    int cell;
    int cols, rows;
};

__device__ __forceinline__ unsigned int rgb_luma(unsigned int r, unsigned int g, unsigned int b) {
    return (77u * r + 150u * g + 29u * b + 128u) >> 8;
}

template <int FMT>
__device__ __forceinline__ unsigned int pixel_luma(const unsigned char* row, int x) {
    if (FMT == FMT_NV12) {
        return row[x];
    } else if (FMT == FMT_YUYV) {
        return row[2 * x];
    } else if (FMT == FMT_RGB) {
        return rgb_luma(row[3 * x], row[3 * x + 1], row[3 * x + 2]);
    } else if (FMT == FMT_BGR) {
        return rgb_luma(row[3 * x + 2], row[3 * x + 1], row[3 * x]);
    } else {
        return rgb_luma(row[4 * x], row[4 * x + 1], row[4 * x + 2]);
    }
}

template <int FMT>
__device__ void luma_cells(LumaParams p) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y;
    if (col >= p.cols || row >= p.rows) {
        return;
    }
    // At most 256 x 256 pixels of 255: fits 32 bits.
    unsigned int sum = 0;
    for (int dy = 0; dy < p.cell; ++dy) {
        const unsigned char* line = p.src + (size_t)(row * p.cell + dy) * (size_t)p.row_bytes;
        for (int dx = 0; dx < p.cell; ++dx) {
            sum += pixel_luma<FMT>(line, col * p.cell + dx);
        }
    }
    unsigned int n = (unsigned int)(p.cell * p.cell);
    p.dst[(size_t)row * (size_t)p.cols + col] = (unsigned char)((sum + n / 2) / n);
}

extern "C" __global__ void luma_rgb(LumaParams p) { luma_cells<FMT_RGB>(p); }
extern "C" __global__ void luma_bgr(LumaParams p) { luma_cells<FMT_BGR>(p); }
extern "C" __global__ void luma_rgba(LumaParams p) { luma_cells<FMT_RGBA>(p); }
extern "C" __global__ void luma_yuyv(LumaParams p) { luma_cells<FMT_YUYV>(p); }
extern "C" __global__ void luma_nv12(LumaParams p) { luma_cells<FMT_NV12>(p); }
