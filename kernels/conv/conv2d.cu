// kernels/conv/conv2d.cu -- the forward pass of a convolutional layer, by direct convolution.
//
// Layout (as PyTorch's conv2d, NCHW): a minibatch X[N][C][H][W] of N samples with C input
// feature maps of H x W pixels; a filter bank W[M][C][K][K] (one K x K filter per pair of
// output map m and input map c); a bias b[M]; the output Y[N][M][H_out][W_out] with
// H_out = H - K + 1, W_out = W - K + 1 (no padding, stride 1):
//
//   Y[n][m][h][w] = b[m] + sum over c < C, p < K, q < K of X[n][c][h + p][w + q] * W[m][c][p][q]
//
// (strictly a cross-correlation: the filter is not flipped, as in every deep-learning library).
//
// Versions, in teaching order:
//   1. conv2d_forward_naive      one thread per output pixel.  A block is a TILE_WIDTH x TILE_WIDTH
//                                tile of one output map of one sample: grid.x runs over the M output
//                                maps, grid.y over the H_grid x W_grid tiles of a map (linearised),
//                                grid.z over the N samples.  Every input pixel and filter weight is
//                                read from global memory (through the caches) by every thread using it.
//   2. conv2d_forward_constant   the same, with the filter bank in __constant__ memory: all threads of
//                                a block use the same weight at the same time, and the constant cache
//                                broadcasts it to a warp in one access.  Filter banks of up to 16384
//                                floats (64 KiB) only.
//   3. conv2d_forward_tiled      the input tile a block needs -- (TILE_WIDTH + K - 1)^2 pixels per input
//                                map, the output tile plus a halo of K - 1 -- and the block's K x K
//                                filter are staged in shared memory, one input map at a time; each
//                                pixel loaded from global memory is then used by up to K * K threads.
//                                Works for any filter bank size.
//   4. conv2d_forward_tiled_multimap
//                                one block computes CONV_MAPS output maps of the same tile: the shared
//                                input tile is loaded once for CONV_MAPS maps instead of once per map,
//                                and every pixel read from shared memory feeds CONV_MAPS
//                                multiply-adds held in registers.  grid.x runs over groups of CONV_MAPS maps.
//   5. conv2d_forward_register_tiled
//                                version 4 with REG_PIXELS output pixels per thread as well, TILE_WIDTH
//                                apart along a row (so a block covers TILE_WIDTH rows by
//                                TILE_WIDTH * REG_PIXELS columns): every weight read from shared memory
//                                feeds REG_PIXELS multiply-adds and every pixel CONV_MAPS, CONV_MAPS *
//                                REG_PIXELS accumulators in registers.  For layers with many maps, where
//                                the arithmetic, not the launch, is what costs.
//   6. conv2d_bias_act_pool_fused
//                                a layer of LeNet in one launch: convolution + bias, activation (ReLU,
//                                tanh or sigmoid) and 2 x 2 max pooling.  One thread per *pooled* output,
//                                computing its four convolution outputs; the convolution output never
//                                goes to memory.  For the tiny layers of LeNet, where launches and
//                                memory round trips cost more than the arithmetic.
//   7. conv2d_forward_whole_sample
//                                for small layers (C3 of LeNet): one block per (sample, group of
//                                SAMPLE_BLOCK_MAPS output maps) stages the whole input sample and the
//                                group's filters in shared memory with one round of global loads (up
//                                to SAMPLE_LOAD_BATCH loads of a thread in flight at once), and after a
//                                single barrier each thread computes a 2 x 2 quad of outputs of 2 maps:
//                                8 independent accumulators, each pixel read from shared memory feeding
//                                2 maps and each weight 4 pixels; for K = 3 and 5 the filter loops are
//                                unrolled and pixels and weights read in pairs (float2).  Optionally fused
//                                with the activation and 2 x 2 max pooling, as version 6 (the quad is the
//                                pooling window).  Layers whose sample does not fit shared memory need
//                                versions 3-5.

#ifndef TILE_WIDTH
#define TILE_WIDTH 16
#endif

#ifndef CONV_MAPS
#define CONV_MAPS 8
#endif

#ifndef REG_PIXELS
#define REG_PIXELS 4
#endif

#ifndef SAMPLE_BLOCK_MAPS
#define SAMPLE_BLOCK_MAPS 8     // output maps per block of conv2d_forward_whole_sample (even)
#endif

#ifndef SAMPLE_LOAD_BATCH
#define SAMPLE_LOAD_BATCH 24    // global loads a thread of conv2d_forward_whole_sample has in flight
#endif

#define SAMPLE_UNROLL_MAX_K 5    // largest filter of conv2d_forward_whole_sample's unrolled path

#define CONV_CONSTANT_CAPACITY 16384   // floats of filter bank in constant memory: the 64 KiB limit

// 1. One thread per output pixel Y[n][m][h][w].  Launch with block (TILE_WIDTH, TILE_WIDTH) and
//    grid (M, H_grid * W_grid, N) where H_grid = ceil(H_out / TILE_WIDTH), W_grid = ceil(W_out / TILE_WIDTH).
__global__ void conv2d_forward_naive(const float* X, const float* Wf, const float* b, float* Y,
                                     int N, int C, int H, int W, int M, int K, int W_grid)
{
    int H_out = H - K + 1, W_out = W - K + 1;
    int m = blockIdx.x;
    int h = (blockIdx.y / W_grid) * TILE_WIDTH + threadIdx.y;
    int w = (blockIdx.y % W_grid) * TILE_WIDTH + threadIdx.x;
    int n = blockIdx.z;
    if (h >= H_out || w >= W_out) return;   // tiles at the right and bottom edges overhang the map

    float acc = b[m];
    for (int c = 0; c < C; ++c) {
        const float* x = X + ((size_t)n * C + c) * H * W;
        const float* f = Wf + ((size_t)m * C + c) * K * K;
        for (int p = 0; p < K; ++p)
            for (int q = 0; q < K; ++q)
                acc += x[(h + p) * W + (w + q)] * f[p * K + q];
    }
    Y[(((size_t)n * M + m) * H_out + h) * W_out + w] = acc;
}

__constant__ float conv_filters[CONV_CONSTANT_CAPACITY];

// 2. As version 1, reading the filter bank from constant memory (set with module.set_constant
//    before the launch).  Within a block every thread reads the same weight f[p * K + q] at the
//    same step, the case the constant cache serves at full speed.
__global__ void conv2d_forward_constant(const float* X, const float* b, float* Y,
                                        int N, int C, int H, int W, int M, int K, int W_grid)
{
    int H_out = H - K + 1, W_out = W - K + 1;
    int m = blockIdx.x;
    int h = (blockIdx.y / W_grid) * TILE_WIDTH + threadIdx.y;
    int w = (blockIdx.y % W_grid) * TILE_WIDTH + threadIdx.x;
    int n = blockIdx.z;
    if (h >= H_out || w >= W_out) return;

    float acc = b[m];
    for (int c = 0; c < C; ++c) {
        const float* x = X + ((size_t)n * C + c) * H * W;
        const float* f = conv_filters + (m * C + c) * K * K;
        for (int p = 0; p < K; ++p)
            for (int q = 0; q < K; ++q)
                acc += x[(h + p) * W + (w + q)] * f[p * K + q];
    }
    Y[(((size_t)n * M + m) * H_out + h) * W_out + w] = acc;
}

// 3. Shared-memory tiles.  Same grid and block as version 1; dynamic shared memory of
//    ((TILE_WIDTH + K - 1)^2 + K * K) floats.  For each input map c the block
//      - loads the input tile X[n][c][h0 .. h0 + TILE_WIDTH + K - 1)[w0 .. ) (zero beyond the map),
//        TILE_WIDTH x TILE_WIDTH threads covering the larger tile in strides of TILE_WIDTH;
//      - loads the filter W[m][c] (the first K * K threads, in a loop in case K > TILE_WIDTH);
//      - waits for the whole tile (__syncthreads), accumulates its K x K products from shared
//        memory, and waits again before the next map's loads overwrite the tile.
//    Every thread takes part in the loads and the barriers, even one whose output pixel is off
//    the map: a thread that returned early would leave part of the halo unloaded.
__global__ void conv2d_forward_tiled(const float* X, const float* Wf, const float* b, float* Y,
                                     int N, int C, int H, int W, int M, int K, int W_grid)
{
    extern __shared__ float shared[];
    int X_tile_width = TILE_WIDTH + K - 1;
    float* X_shared = shared;                                   // X_tile_width x X_tile_width
    float* W_shared = shared + X_tile_width * X_tile_width;     // K x K

    int H_out = H - K + 1, W_out = W - K + 1;
    int m = blockIdx.x;
    int n = blockIdx.z;
    int h0 = (blockIdx.y / W_grid) * TILE_WIDTH;   // top-left output pixel of this block's tile
    int w0 = (blockIdx.y % W_grid) * TILE_WIDTH;
    int ty = threadIdx.y, tx = threadIdx.x;
    int h = h0 + ty, w = w0 + tx;

    float acc = 0.0f;
    for (int c = 0; c < C; ++c) {
        const float* x = X + ((size_t)n * C + c) * H * W;
        for (int i = ty; i < X_tile_width; i += TILE_WIDTH)
            for (int j = tx; j < X_tile_width; j += TILE_WIDTH) {
                int hi = h0 + i, wj = w0 + j;
                X_shared[i * X_tile_width + j] = (hi < H && wj < W) ? x[hi * W + wj] : 0.0f;
            }
        for (int i = ty * TILE_WIDTH + tx; i < K * K; i += TILE_WIDTH * TILE_WIDTH)   // (K may exceed TILE_WIDTH)
            W_shared[i] = Wf[((size_t)m * C + c) * K * K + i];
        __syncthreads();

        for (int p = 0; p < K; ++p)
            for (int q = 0; q < K; ++q)
                acc += X_shared[(ty + p) * X_tile_width + (tx + q)] * W_shared[p * K + q];
        __syncthreads();
    }
    if (h < H_out && w < W_out)
        Y[(((size_t)n * M + m) * H_out + h) * W_out + w] = acc + b[m];
}

// 4. Version 3 for CONV_MAPS output maps per block.  Launch with block (TILE_WIDTH, TILE_WIDTH),
//    grid (ceil(M / CONV_MAPS), H_grid * W_grid, N), dynamic shared memory of
//    ((TILE_WIDTH + K - 1)^2 + CONV_MAPS * K * K) floats.  Maps past M (when M is no multiple of
//    CONV_MAPS) get zero filters and are not written.
__global__ void conv2d_forward_tiled_multimap(const float* X, const float* Wf, const float* b, float* Y,
                                              int N, int C, int H, int W, int M, int K, int W_grid)
{
    extern __shared__ float shared[];
    int X_tile_width = TILE_WIDTH + K - 1;
    float* X_shared = shared;                                   // X_tile_width x X_tile_width
    float* W_shared = shared + X_tile_width * X_tile_width;     // CONV_MAPS x K x K

    int H_out = H - K + 1, W_out = W - K + 1;
    int m0 = blockIdx.x * CONV_MAPS;
    int n = blockIdx.z;
    int h0 = (blockIdx.y / W_grid) * TILE_WIDTH;
    int w0 = (blockIdx.y % W_grid) * TILE_WIDTH;
    int ty = threadIdx.y, tx = threadIdx.x;
    int thread = ty * TILE_WIDTH + tx;
    int h = h0 + ty, w = w0 + tx;

    float acc[CONV_MAPS];
#pragma unroll
    for (int j = 0; j < CONV_MAPS; ++j) acc[j] = 0.0f;

    for (int c = 0; c < C; ++c) {
        const float* x = X + ((size_t)n * C + c) * H * W;
        for (int i = ty; i < X_tile_width; i += TILE_WIDTH)
            for (int j = tx; j < X_tile_width; j += TILE_WIDTH) {
                int hi = h0 + i, wj = w0 + j;
                X_shared[i * X_tile_width + j] = (hi < H && wj < W) ? x[hi * W + wj] : 0.0f;
            }
        for (int i = thread; i < CONV_MAPS * K * K; i += TILE_WIDTH * TILE_WIDTH) {
            int j = i / (K * K), pq = i % (K * K);
            W_shared[i] = (m0 + j < M) ? Wf[((size_t)(m0 + j) * C + c) * K * K + pq] : 0.0f;
        }
        __syncthreads();

        for (int p = 0; p < K; ++p)
            for (int q = 0; q < K; ++q) {
                float xv = X_shared[(ty + p) * X_tile_width + (tx + q)];
#pragma unroll
                for (int j = 0; j < CONV_MAPS; ++j)
                    acc[j] += xv * W_shared[(j * K + p) * K + q];
            }
        __syncthreads();
    }
    if (h < H_out && w < W_out) {
#pragma unroll
        for (int j = 0; j < CONV_MAPS; ++j)
            if (m0 + j < M)
                Y[(((size_t)n * M + m0 + j) * H_out + h) * W_out + w] = acc[j] + b[m0 + j];
    }
}

// 5. Register tiling.  Launch with block (TILE_WIDTH, TILE_WIDTH), grid (ceil(M / CONV_MAPS),
//    H_grid * W_grid, N) where H_grid = ceil(H_out / TILE_WIDTH) and W_grid = ceil(W_out /
//    (TILE_WIDTH * REG_PIXELS)), dynamic shared memory of ((TILE_WIDTH + K - 1) *
//    (TILE_WIDTH * REG_PIXELS + K - 1) + CONV_MAPS * K * K) floats.  Thread (ty, tx) computes the
//    pixels (h0 + ty, w0 + tx + j * TILE_WIDTH), j < REG_PIXELS, of CONV_MAPS maps: neighbouring
//    threads read neighbouring shared-memory words (no bank conflicts) at every step.
__global__ void conv2d_forward_register_tiled(const float* X, const float* Wf, const float* b, float* Y,
                                              int N, int C, int H, int W, int M, int K, int W_grid)
{
    extern __shared__ float shared[];
    const int TILE_COLUMNS = TILE_WIDTH * REG_PIXELS;           // output columns of a block
    int X_tile_height = TILE_WIDTH + K - 1, X_tile_width = TILE_COLUMNS + K - 1;
    float* X_shared = shared;                                   // X_tile_height x X_tile_width
    float* W_shared = shared + X_tile_height * X_tile_width;    // CONV_MAPS x K x K

    int H_out = H - K + 1, W_out = W - K + 1;
    int m0 = blockIdx.x * CONV_MAPS;
    int n = blockIdx.z;
    int h0 = (blockIdx.y / W_grid) * TILE_WIDTH;
    int w0 = (blockIdx.y % W_grid) * TILE_COLUMNS;
    int ty = threadIdx.y, tx = threadIdx.x;
    int thread = ty * TILE_WIDTH + tx;

    float acc[CONV_MAPS][REG_PIXELS];
#pragma unroll
    for (int j = 0; j < CONV_MAPS; ++j)
#pragma unroll
        for (int k = 0; k < REG_PIXELS; ++k) acc[j][k] = 0.0f;

    for (int c = 0; c < C; ++c) {
        const float* x = X + ((size_t)n * C + c) * H * W;
        // Consecutive threads load consecutive columns of a row: coalesced reads of X.
        for (int i = thread; i < X_tile_height * X_tile_width; i += TILE_WIDTH * TILE_WIDTH) {
            int hi = h0 + i / X_tile_width, wj = w0 + i % X_tile_width;
            X_shared[i] = (hi < H && wj < W) ? x[hi * W + wj] : 0.0f;
        }
        for (int i = thread; i < CONV_MAPS * K * K; i += TILE_WIDTH * TILE_WIDTH) {
            int j = i / (K * K), pq = i % (K * K);
            W_shared[i] = (m0 + j < M) ? Wf[((size_t)(m0 + j) * C + c) * K * K + pq] : 0.0f;
        }
        __syncthreads();

        for (int p = 0; p < K; ++p)
            for (int q = 0; q < K; ++q) {
                float xv[REG_PIXELS];
#pragma unroll
                for (int k = 0; k < REG_PIXELS; ++k)
                    xv[k] = X_shared[(ty + p) * X_tile_width + tx + k * TILE_WIDTH + q];
#pragma unroll
                for (int j = 0; j < CONV_MAPS; ++j) {
                    float wv = W_shared[(j * K + p) * K + q];
#pragma unroll
                    for (int k = 0; k < REG_PIXELS; ++k)
                        acc[j][k] += xv[k] * wv;
                }
            }
        __syncthreads();
    }
    int h = h0 + ty;
    if (h >= H_out) return;
#pragma unroll
    for (int j = 0; j < CONV_MAPS; ++j) {
        if (m0 + j >= M) break;
#pragma unroll
        for (int k = 0; k < REG_PIXELS; ++k) {
            int w = w0 + tx + k * TILE_WIDTH;
            if (w < W_out)
                Y[(((size_t)n * M + m0 + j) * H_out + h) * W_out + w] = acc[j][k] + b[m0 + j];
        }
    }
}

// 6. Convolution + bias, activation, 2 x 2 max pooling (stride 2) in one launch.
//    P[n][m][i][j] = max over the 2 x 2 window of act(Y[n][m][2i + di][2j + dj]),
//    P is N x M x (H_out / 2) x (W_out / 2) (an odd last row or column of Y is dropped, as
//    max pooling with floor does).  activation: 0 = none, 1 = ReLU, 2 = tanh, 3 = sigmoid.
//    One thread per pooled output, a flat index over P (grid-sized to cover it); the filter bank
//    is read from constant memory (conv_filters, as version 2), so the four convolutions of a
//    thread share each weight load and neighbouring threads read neighbouring pixels.
__device__ __forceinline__ float conv_activate(float v, int activation)
{
    if (activation == 1) return fmaxf(v, 0.0f);
    if (activation == 2) return tanhf(v);
    if (activation == 3) return 1.0f / (1.0f + expf(-v));
    return v;
}

__global__ void conv2d_bias_act_pool_fused(const float* X, const float* b, float* P,
                                           int N, int C, int H, int W, int M, int K, int activation)
{
    int H_out = H - K + 1, W_out = W - K + 1;
    int H_pool = H_out / 2, W_pool = W_out / 2;
    int total = N * M * H_pool * W_pool;
    int index = blockIdx.x * blockDim.x + threadIdx.x;
    if (index >= total) return;
    int j = index % W_pool;
    int i = (index / W_pool) % H_pool;
    int m = (index / (W_pool * H_pool)) % M;
    int n = index / (W_pool * H_pool * M);

    float a00 = 0.0f, a01 = 0.0f, a10 = 0.0f, a11 = 0.0f;   // the four convolution outputs
    int h = 2 * i, w = 2 * j;
    for (int c = 0; c < C; ++c) {
        const float* x = X + ((size_t)n * C + c) * H * W;
        const float* f = conv_filters + (m * C + c) * K * K;
        for (int p = 0; p < K; ++p) {
            const float* row0 = x + (h + p) * W + w;
            const float* row1 = row0 + W;
            for (int q = 0; q < K; ++q) {
                float fv = f[p * K + q];
                a00 += row0[q] * fv;
                a01 += row0[q + 1] * fv;
                a10 += row1[q] * fv;
                a11 += row1[q + 1] * fv;
            }
        }
    }
    float bias = b[m];
    float v = fmaxf(fmaxf(conv_activate(a00 + bias, activation), conv_activate(a01 + bias, activation)),
                    fmaxf(conv_activate(a10 + bias, activation), conv_activate(a11 + bias, activation)));
    P[index] = v;
}


// Two helpers of version 7 (below): the sums of one work item.
//
// The quad's 8 sums for an odd K <= SAMPLE_UNROLL_MAX_K (so that K + 1 pixels are K / 2 + 1 pairs)
// and an even W (so that pairs (2j + k, 2j + k + 1), k even, are 8-byte aligned), each of the K + 1
// input rows the quad needs read once, as float2 pairs.  Called with K a literal (3 or 5): once the
// call is inlined the compiler knows the trip counts and unrolls the filter loops completely, so
// that xv lives in registers and every offset is a constant.
// x: the quad's top-left pixel in map 0 of the sample; f: the pair's filters, float2 per (c, p, q).
__device__ __forceinline__ void whole_sample_quad_unrolled(const float* x, const float2* f, int C, int H, int W, int K,
                                                           float* acc)
{
    const int PAIRS = SAMPLE_BLOCK_MAPS / 2;   // float2 per (c, p, q) in the interleaved filters
    for (int c = 0; c < C; ++c) {
        const float* xc = x + c * H * W;
        const float2* fc = f + c * K * K * PAIRS;
#pragma unroll
        for (int r = 0; r <= K; ++r) {                  // input row 2i + r feeds output row 2i (filter
            float xv[SAMPLE_UNROLL_MAX_K + 1];           // row r) and output row 2i + 1 (filter row r - 1)
#pragma unroll
            for (int k = 0; k <= K; k += 2) {
                float2 pair = *(const float2*)(xc + r * W + k);
                xv[k] = pair.x;
                xv[k + 1] = pair.y;
            }
#pragma unroll
            for (int q = 0; q < K; ++q) {
                if (r < K) {
                    float2 w = fc[(r * K + q) * PAIRS];
                    acc[0] += xv[q] * w.x;  acc[1] += xv[q + 1] * w.x;
                    acc[4] += xv[q] * w.y;  acc[5] += xv[q + 1] * w.y;
                }
                if (r > 0) {
                    float2 w = fc[((r - 1) * K + q) * PAIRS];
                    acc[2] += xv[q] * w.x;  acc[3] += xv[q + 1] * w.x;
                    acc[6] += xv[q] * w.y;  acc[7] += xv[q + 1] * w.y;
                }
            }
        }
    }
}

// The same sums for any K and W: plain loops, scalar reads.
__device__ __forceinline__ void whole_sample_quad_any(const float* x, const float2* f, int C, int H, int W, int K, float* acc)
{
    const int PAIRS = SAMPLE_BLOCK_MAPS / 2;
    for (int c = 0; c < C; ++c) {
        const float* xc = x + c * H * W;
        const float2* fc = f + c * K * K * PAIRS;
        for (int p = 0; p < K; ++p)
            for (int q = 0; q < K; ++q) {
                float2 w = fc[(p * K + q) * PAIRS];
                float x00 = xc[p * W + q], x01 = xc[p * W + q + 1];
                float x10 = xc[(p + 1) * W + q], x11 = xc[(p + 1) * W + q + 1];
                acc[0] += x00 * w.x;  acc[1] += x01 * w.x;  acc[2] += x10 * w.x;  acc[3] += x11 * w.x;
                acc[4] += x00 * w.y;  acc[5] += x01 * w.y;  acc[6] += x10 * w.y;  acc[7] += x11 * w.y;
            }
    }
}

// 7. Whole samples in shared memory, a 2 x 2 quad of outputs of 2 maps per thread.
//
//    Why versions 3-6 are slow on C3 (6 maps of 14 x 14 in, 16 maps of 10 x 10 out, 5 x 5 filters):
//    each output is a chain of C * K * K = 150 dependent multiply-adds, about 600 cycles at 4 cycles
//    each even with every operand at hand; the tiled versions load one input map per step, wait at
//    two barriers per step and go back to global memory six times; a 16 x 16 tile of a 10 x 10 map
//    leaves 156 of 256 threads idle.  Here a block stages everything it needs at once, waits once,
//    and each thread works on 8 independent chains.
//
//    Launch with grid (ceil(M / SAMPLE_BLOCK_MAPS), N), any block size (a multiple of 32; the
//    threads loop over the block's work items), dynamic shared memory of
//    4 * (round4(C * H * W + W + 2) + C * K * K * SAMPLE_BLOCK_MAPS) bytes:
//      - the sample X[n] as it lies in global memory (C maps of H x W, no padding), plus W + 2 zeros;
//      - the filters of maps m0 .. m0 + SAMPLE_BLOCK_MAPS - 1, interleaved as [c][p][q][map] so that
//        the two maps of a thread are neighbours (one float2 read); zeros for maps past M.
//    A work item is (pair of maps, quad): output rows 2i, 2i + 1, columns 2j, 2j + 1 of maps m, m + 1.
//    pool = 0: Y[n][m][h][w] = act(conv + b[m]), with ceil(H_out / 2) x ceil(W_out / 2) quads; the
//    quad past an odd last row or column reads one row or column too far (the next row's pixels,
//    or the zeros after the sample) into outputs that are never written.
//    pool = 1: P = 2 x 2 max pool (floor) of act(conv + b), P is N x M x (H_out / 2) x (W_out / 2).
//    activation as version 6: 0 none, 1 ReLU, 2 tanh, 3 sigmoid.
__global__ void conv2d_forward_whole_sample(const float* X, const float* Wf, const float* b, float* Y,
                                            int N, int C, int H, int W, int M, int K, int activation, int pool)
{
    extern __shared__ float shared[];
    int H_out = H - K + 1, W_out = W - K + 1;
    int sample = C * H * W, filter_size = C * K * K;
    int X_count = (sample + W + 2 + 3) / 4 * 4;                  // floats of the sample region (16-byte multiple)
    int W_count = filter_size * SAMPLE_BLOCK_MAPS;
    float* X_shared = shared;
    float* W_shared = shared + X_count;                          // [c][p][q][SAMPLE_BLOCK_MAPS]
    int n = blockIdx.y, m0 = blockIdx.x * SAMPLE_BLOCK_MAPS;
    const float* x = X + (size_t)n * sample;

    // Stage the sample and the filters: SAMPLE_LOAD_BATCH loads per thread issued before the first
    // store waits for one of them, so that a block pays about one round trip to memory, not one
    // per load.  Shared index i < X_count is pixel i of the sample; past it, filter element
    // (map i % SAMPLE_BLOCK_MAPS, (c, p, q) = i / SAMPLE_BLOCK_MAPS).
    int total = X_count + W_count;
    for (int base = 0; base < total; base += SAMPLE_LOAD_BATCH * blockDim.x) {
        float v[SAMPLE_LOAD_BATCH];
#pragma unroll
        for (int u = 0; u < SAMPLE_LOAD_BATCH; ++u) {
            int i = base + u * blockDim.x + threadIdx.x;
            v[u] = 0.0f;
            if (i < X_count) {
                if (i < sample) v[u] = x[i];
            } else if (i < total) {
                int j = (i - X_count) % SAMPLE_BLOCK_MAPS, cpq = (i - X_count) / SAMPLE_BLOCK_MAPS;
                if (m0 + j < M) v[u] = Wf[(size_t)(m0 + j) * filter_size + cpq];
            }
        }
#pragma unroll
        for (int u = 0; u < SAMPLE_LOAD_BATCH; ++u) {
            int i = base + u * blockDim.x + threadIdx.x;
            if (i < total) shared[i] = v[u];
        }
    }
    __syncthreads();

    int H_quads = pool ? H_out / 2 : (H_out + 1) / 2, W_quads = pool ? W_out / 2 : (W_out + 1) / 2;
    int quads = H_quads * W_quads;
    int maps = min(SAMPLE_BLOCK_MAPS, M - m0);
    int items = (maps + 1) / 2 * quads;
    for (int item = threadIdx.x; item < items; item += blockDim.x) {
        int pair = item / quads, quad = item % quads;            // neighbouring threads: neighbouring quads
        int i = quad / W_quads, j = quad % W_quads;
        const float* xq = X_shared + (2 * i) * W + 2 * j;
        const float2* fq = (const float2*)W_shared + pair;
        float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};   // [map][row][column]
        if (K == 5 && W % 2 == 0)
            whole_sample_quad_unrolled(xq, fq, C, H, W, 5, acc);
        else if (K == 3 && W % 2 == 0)
            whole_sample_quad_unrolled(xq, fq, C, H, W, 3, acc);
        else
            whole_sample_quad_any(xq, fq, C, H, W, K, acc);

#pragma unroll
        for (int t = 0; t < 2; ++t) {
            int m = m0 + 2 * pair + t;
            if (m >= M) break;
            float bias = b[m];
            float o00 = conv_activate(acc[4 * t + 0] + bias, activation), o01 = conv_activate(acc[4 * t + 1] + bias, activation);
            float o10 = conv_activate(acc[4 * t + 2] + bias, activation), o11 = conv_activate(acc[4 * t + 3] + bias, activation);
            if (pool) {
                Y[(((size_t)n * M + m) * H_quads + i) * W_quads + j] = fmaxf(fmaxf(o00, o01), fmaxf(o10, o11));
            } else {
                float* y = Y + (((size_t)n * M + m) * H_out + 2 * i) * W_out + 2 * j;
                bool right = 2 * j + 1 < W_out, below = 2 * i + 1 < H_out;
                y[0] = o00;
                if (right) y[1] = o01;
                if (below) y[W_out] = o10;
                if (below && right) y[W_out + 1] = o11;
            }
        }
    }
}
