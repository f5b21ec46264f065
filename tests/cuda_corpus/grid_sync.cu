// Grid-wide cooperative groups: one launch in several phases separated by grid.sync(),
// the way persistent kernels and single-pass reductions write them.  Each needs every
// block resident at once (a cooperative launch, sized to what the device holds).
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// Sum of x in one launch: block partials, grid.sync(), then block 0 adds the partials.
__global__ void grid_sum(const float* x, float* partial, float* out, int n) {
    cg::grid_group grid = cg::this_grid();
    cg::thread_block block = cg::this_thread_block();
    __shared__ float s[256];
    float v = 0.0f;
    for (unsigned long long i = grid.thread_rank(); i < (unsigned long long)n; i += grid.size()) v += x[i];
    s[block.thread_rank()] = v;
    block.sync();
    for (unsigned stride = block.size() / 2; stride > 0; stride /= 2) {
        if (block.thread_rank() < stride) s[block.thread_rank()] += s[block.thread_rank() + stride];
        block.sync();
    }
    if (block.thread_rank() == 0) partial[blockIdx.x] = s[0];
    grid.sync();
    if (grid.thread_rank() == 0) {
        float total = 0.0f;
        for (unsigned b = 0; b < gridDim.x; ++b) total += partial[b];
        *out = total;
    }
}

// x / sum(x): every thread needs the total, so the whole grid waits for it.
__global__ void normalize_sum(float* x, float* partial, int n) {
    auto grid = cg::this_grid();
    __shared__ float s[128];
    float v = 0.0f;
    for (unsigned long long i = grid.thread_rank(); i < (unsigned long long)n; i += grid.size()) v += x[i];
    s[threadIdx.x] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float b = 0.0f;
        for (int k = 0; k < blockDim.x; ++k) b += s[k];
        partial[blockIdx.x] = b;
    }
    grid.sync();
    float total = 0.0f;
    for (unsigned b = 0; b < grid.num_blocks(); ++b) total += partial[b];
    grid.sync();  // every block has read the partials before any x changes
    for (unsigned long long i = grid.thread_rank(); i < (unsigned long long)n; i += grid.size()) x[i] /= total;
}

// A persistent Jacobi smoother: the iterations run inside one launch, ping-ponging two buffers.
__global__ void jacobi_1d(float* a, float* b, int n, int iterations) {
    cg::grid_group grid = cg::this_grid();
    for (int it = 0; it < iterations; ++it) {
        const float* src = (it % 2 == 0) ? a : b;
        float* dst = (it % 2 == 0) ? b : a;
        for (int i = grid.thread_rank(); i < n; i += grid.size()) {
            float left = i > 0 ? src[i - 1] : src[i];
            float right = i < n - 1 ? src[i + 1] : src[i];
            dst[i] = 0.25f * left + 0.5f * src[i] + 0.25f * right;
        }
        cg::sync(grid);
    }
}

// An exclusive scan of block totals in a single launch (the block sums, then their offsets).
__global__ void blocked_prefix_sum(const int* x, int* y, int* block_totals, int n) {
    cg::grid_group grid = cg::this_grid();
    __shared__ int tile[64];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? x[i] : 0;
    __syncthreads();
    for (int d = 1; d < blockDim.x; d *= 2) {
        int add = threadIdx.x >= d ? tile[threadIdx.x - d] : 0;
        __syncthreads();
        tile[threadIdx.x] += add;
        __syncthreads();
    }
    if (threadIdx.x == blockDim.x - 1) block_totals[blockIdx.x] = tile[threadIdx.x];
    grid.sync();
    int offset = 0;
    for (int b = 0; b < blockIdx.x; ++b) offset += block_totals[b];
    if (i < n) y[i] = tile[threadIdx.x] + offset;
}
