// kernels/gemm/sgemm_hopper.cu -- versions 10 and 11 of C = A B: single-precision accuracy from TF32 tensor
// cores ("3xTF32"), with Hopper's warpgroup matrix multiply-accumulate (wgmma).  GPU only, sm_90.
// Version 10 first; version 11 (the same products, fed by the TMA unit) is the second half of the file.
//
// A tensor core multiplies TF32 numbers: float's 8-bit exponent with a 10-bit mantissa (float has 23).
// One TF32 product is 8x the FP32 multiply-add rate, but its inputs carry ~3 decimal digits.  The
// trick (NVIDIA CUTLASS's "3xTF32"): split each input x into big = tf32(x) and small = tf32(x - big);
// x - big is exact in float and small carries the next 11 bits, so big + small holds 21-22 of
// float's 24.  Then
//     A B  ~  A_small B_big + A_big B_small + A_big B_big
// (A_small B_small, about 2^-22 of the product, is dropped), three tensor-core products accumulated
// in float: the error of an FP32 product at a third of the tensor cores' TF32 rate (8/3 of the FP32 units').
// The small products go first, so that they are added while the sum is still small.
//
// How the work is laid out (kernels/gemm/sgemm_hopper.py launches it):
//   * tf32x3_split_b runs first: B (K x N, or N x K with b_transposed) becomes B_big and B_small,
//     zero-padded to whole tiles and stored tile by tile in exactly the order a tile has in shared
//     memory, so that the product kernel copies a stage of B as one contiguous block.  wgmma reads B
//     from shared memory "K-major" (each 16-byte row of a core matrix holds 4 consecutive k of one n),
//     the only order it accepts for TF32.
//   * sgemm_tf32x3_wgmma: a block of H_WARPGROUPS warpgroups (2: 256 threads) computes a
//     (64 H_WARPGROUPS) x 128 tile of C; each warpgroup 64 x 128 of it, with one wgmma.m64n128k8 per
//     product and k-step (64 accumulators per thread).  A is copied to shared memory as it is (float)
//     and each thread splits its own A values into big and small in registers, from where wgmma takes
//     A; B_big and B_small come from shared memory through matrix descriptors.  k-tiles of A and B
//     arrive by cp.async into H_STAGES stages; with H_INFLIGHT = 1 one k-tile's products still run
//     while the next k-tile's A is split and its products issued.
//   * The tensor cores' float sums truncate; every H_PROMOTE k-tiles the partial sum is added to a
//     float total by the FP32 units (64 more registers, hence 2 warpgroups rather than 4).
//   * K order inside a k-tile: thread (g, q) of a warp needs, at k-step s, A at k = q and q + 4 of
//     the step.  Any order of the H_BK = 32 k of a k-tile gives the same sum, as long as A and B agree, so
//     the step's k = q is taken to be column 8q + 2s of the tile and k = q + 4 column 8q + 2s + 1:
//     each thread then reads its 8 values of a row as two float4, and the split kernel stores B's
//     rows in the same order.
//
// Version 10 copies A's rows 16 bytes at a time when K % 4 == 0, float by float otherwise.

#ifndef DLK_ARCH_SPECIFIC
#error "sgemm_hopper.cu is built for sm_90a only: load it with the define DLK_ARCH_SPECIFIC=1"
#endif

#ifndef H_GROUP
#define H_GROUP 8                  // tile rows per group in the block order (L2 reuse, as version 7)
#endif
#ifndef H_WARPGROUPS
#define H_WARPGROUPS 2             // warpgroups per block, each 64 rows of the tile
#endif
#ifndef H_BK
#define H_BK 32                    // k per stage: 16 or 32
#endif
#ifndef H_STAGES
#define H_STAGES 4
#endif
#ifndef H_INFLIGHT
#define H_INFLIGHT 1               // k-tiles whose products may still run when the next one's are issued (0 or 1)
#endif
#ifndef H_PROMOTE
#define H_PROMOTE 4                // k-tiles summed on the tensor cores before adding to the float sum (0: never)
#endif
#define H_BM (64 * H_WARPGROUPS)   // rows of C per block
#define H_BN 128                   // columns of C per block: one wgmma n128
#define H_THREADS (128 * H_WARPGROUPS)
#define H_STEPS (H_BK / 8)         // wgmma k-steps per stage
#define H_PER_THREAD (H_BK / 4)    // A values a thread reads per row and stage
#define H_A_STRIDE (H_BK == 16 ? 16 : H_BK + 4)   // floats per A row in shared memory: conflict-free float4 reads
#define H_A_FLOATS (H_BM * H_A_STRIDE)
#define H_B_FLOATS (H_BN * H_BK)   // one of B_big, B_small per stage
#define H_STAGE_FLOATS (H_A_FLOATS + 2 * H_B_FLOATS)
#define H_SHARED_BYTES (H_STAGES * H_STAGE_FLOATS * 4)
// B's shared-memory image of one k-tile: [k-step s][core matrix along k c: 2][n group: 16][n: 8][k: 4]
#define H_CORE_BYTES 128                       // one core matrix: 8 rows of 16 bytes
#define H_LBO ((H_BN / 8) * H_CORE_BYTES)      // from one core matrix to the next along k
#define H_SBO H_CORE_BYTES                     // from one core matrix to the next along n

__device__ __forceinline__ unsigned tf32_bits(float x)
{
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

// ------------------------------------------------------------------------------------------------
// B -> B_big, B_small in the product kernel's tile order.  Block (kt, nt) does one 32 x 128 tile.
__global__ void __launch_bounds__(256)
tf32x3_split_b(const float* __restrict__ B, int K, int N, int b_transposed, float* __restrict__ Bp)
{
    __shared__ float tile[H_BK][H_BN + 1];
    int kt = blockIdx.x, nt = blockIdx.y;
    int k0 = kt * H_BK, n0 = nt * H_BN;
    for (int e = threadIdx.x; e < H_BK * H_BN; e += blockDim.x) {
        int k = b_transposed ? e % H_BK : e / H_BN;      // read along B's rows either way
        int n = b_transposed ? e / H_BK : e % H_BN;
        int gk = k0 + k, gn = n0 + n;
        float v = 0.0f;
        if (gk < K && gn < N) v = b_transposed ? B[(size_t)gn * K + gk] : B[(size_t)gk * N + gn];
        tile[k][n] = v;
    }
    __syncthreads();
    float* out = Bp + ((size_t)nt * gridDim.x + kt) * 2 * H_B_FLOATS;
    for (int e = threadIdx.x; e < H_B_FLOATS; e += blockDim.x) {
        int kk = e % 4, nr = (e / 4) % 8, ng = (e / 32) % (H_BN / 8), c = (e / (4 * H_BN)) % 2, s = e / (8 * H_BN);
        float v = tile[H_PER_THREAD * kk + 2 * s + c][ng * 8 + nr];   // the k order of the header comment
        float big = __uint_as_float(tf32_bits(v));
        out[e] = big;
        out[H_B_FLOATS + e] = __uint_as_float(tf32_bits(v - big));
    }
}

// ------------------------------------------------------------------------------------------------
__device__ __forceinline__ void cp_async16(float* dst, const float* src, int bytes)
{
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(d), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async4(float* dst, const float* src, int bytes)
{
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" :: "r"(d), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

// A matrix descriptor: where a K-major, unswizzled tile starts in shared memory and its two strides.
__device__ __forceinline__ unsigned long long b_descriptor(const float* p)
{
    unsigned addr = (unsigned)__cvta_generic_to_shared(p);
    return (unsigned long long)((addr & 0x3FFFF) >> 4)
         | ((unsigned long long)(H_LBO >> 4) << 16)
         | ((unsigned long long)(H_SBO >> 4) << 32);
}

// d += A B for one k-step: A (64 x 8) from this warpgroup's registers, B (8 x 128) from shared memory.
__device__ __forceinline__ void wgmma_m64n128k8(float (&d)[64], const unsigned (&a)[4], unsigned long long b, int accumulate)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
}

// Stage kt of A (256 x 32 floats, rows padded) and of B_big, B_small (the split kernel's image).
__device__ __forceinline__ void load_stage(float* stage, const float* A, const float* Bt, int M, int K,
                                           int m0, int kt, int t)
{
    #pragma unroll
    for (int c = t; c < H_BM * H_BK / 4; c += H_THREADS) {
        int row = c / (H_BK / 4), col = (c % (H_BK / 4)) * 4;
        int gm = m0 + row, gk = kt * H_BK + col;
        float* dst = stage + row * H_A_STRIDE + col;
        if (K % 4 == 0) {                              // rows 16-byte aligned: one copy of 4 floats
            bool inside = gm < M && gk < K;
            cp_async16(dst, inside ? A + (size_t)gm * K + gk : A, inside ? 16 : 0);
        } else {                                       // else float by float (zeros past the edges)
            #pragma unroll
            for (int e = 0; e < 4; ++e) {
                bool inside = gm < M && gk + e < K;
                cp_async4(dst + e, inside ? A + (size_t)gm * K + gk + e : A, inside ? 4 : 0);
            }
        }
    }
    const float* src = Bt + (size_t)kt * 2 * H_B_FLOATS;
    float* dst = stage + H_A_FLOATS;
    #pragma unroll
    for (int c = 4 * t; c < 2 * H_B_FLOATS; c += 4 * H_THREADS) cp_async16(dst + c, src + c, 16);
}

// Where version 11 keeps A's element (row r, column c) of a k-tile, in floats from the tile's start: rows
// H_BK floats apart, and the 16-byte pieces of row r permuted by XOR with r % 8.  Threads g = 0..7 of a
// warp read rows r0 = 8i + g at the same columns: without the permutation the rows, H_BK floats (a
// multiple of 32 banks) apart, would fall on the same banks.
__device__ __forceinline__ int a_packed_offset(int r, int c)
{
    return r * H_BK + ((((c >> 2) ^ r) & (H_BK / 4 - 1)) << 2) + (c & 3);
}

// This thread's A values of one k-tile (rows r0 and r0 + 8, in the k order of the header comment),
// split into big and small TF32 parts in registers, where wgmma takes A from.
// Version 10 keeps A's rows H_A_STRIDE floats apart; version 11 H_BK apart, each row's 16-byte pieces
// permuted as a_packed_offset says (`packed`).
template <bool packed>
__device__ __forceinline__ void split_a(const float* As, int r0, int q, unsigned (&big)[H_STEPS][4],
                                        unsigned (&small)[H_STEPS][4])
{
    float top[H_PER_THREAD], bot[H_PER_THREAD];
    #pragma unroll
    for (int v = 0; v < H_PER_THREAD; v += 4) {
        int c = H_PER_THREAD * q + v;
        int top_at = packed ? a_packed_offset(r0, c) : r0 * H_A_STRIDE + c;
        int bot_at = packed ? a_packed_offset(r0 + 8, c) : (r0 + 8) * H_A_STRIDE + c;
        float4 x = *reinterpret_cast<const float4*>(As + top_at);
        float4 y = *reinterpret_cast<const float4*>(As + bot_at);
        top[v] = x.x; top[v + 1] = x.y; top[v + 2] = x.z; top[v + 3] = x.w;
        bot[v] = y.x; bot[v + 1] = y.y; bot[v + 2] = y.z; bot[v + 3] = y.w;
    }
    #pragma unroll
    for (int s = 0; s < H_STEPS; ++s) {
        float v[4] = {top[2 * s], bot[2 * s], top[2 * s + 1], bot[2 * s + 1]};   // (g,q) (g+8,q) (g,q+4) (g+8,q+4)
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            big[s][j] = tf32_bits(v[j]);
            small[s][j] = tf32_bits(v[j] - __uint_as_float(big[s][j]));
        }
    }
}

// Issue one k-tile's 3 x H_STEPS products (B_big and B_small from the stage at Bs) as one wgmma group,
// and wait for earlier groups as H_PROMOTE and H_INFLIGHT say.
//
// The tensor cores add in float but truncate, and a sum that only grows collects that bias: over
// K = 4096 it comes to 10x the error of an FP32 product.  So they sum H_PROMOTE k-tiles into
// `part`, which the FP32 units then add to `acc`, rounding to nearest (H_PROMOTE = 0: no `part`).
__device__ __forceinline__ void products(const float* Bs, int kt, int k_tiles, float (&acc)[64], float (&part)[64],
                                         const unsigned (&big)[H_STEPS][4], const unsigned (&small)[H_STEPS][4])
{
    int fresh = H_PROMOTE && (kt % (H_PROMOTE ? H_PROMOTE : 1)) == 0;
    bool promote = H_PROMOTE && ((kt + 1) % (H_PROMOTE ? H_PROMOTE : 1) == 0 || kt + 1 == k_tiles);
    float (&sum)[64] = H_PROMOTE ? part : acc;
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    #pragma unroll
    for (int s = 0; s < H_STEPS; ++s) {
        unsigned long long b_big = b_descriptor(Bs + s * (H_B_FLOATS / H_STEPS));
        unsigned long long b_small = b_descriptor(Bs + H_B_FLOATS + s * (H_B_FLOATS / H_STEPS));
        wgmma_m64n128k8(sum, small[s], b_big, !(fresh && s == 0));
        wgmma_m64n128k8(sum, big[s], b_small, 1);
        wgmma_m64n128k8(sum, big[s], b_big, 1);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    if (promote || H_INFLIGHT == 0 || kt + 1 == k_tiles) {
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    } else {
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
    }
    if (H_PROMOTE && promote) {
        #pragma unroll
        for (int i = 0; i < 64; ++i) {
            asm volatile("" : "+f"(part[i]) :: "memory");
            acc[i] += part[i];
        }
    }
}

// One k-tile of version 10: wait for its stage, start copying a later one, split this thread's A
// values and issue the products.
__device__ __forceinline__ void k_tile(float* smem, const float* A, const float* Bt, int M, int K, int m0, int kt,
                                       int k_tiles, int t, int r0, int q, float (&acc)[64], float (&part)[64],
                                       unsigned (&big)[H_STEPS][4], unsigned (&small)[H_STEPS][4])
{
    cp_async_wait<H_STAGES - 2 - H_INFLIGHT>();        // this thread's copies of stage kt have landed
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");   // ... visible to wgmma
    __syncthreads();                                   // ... and everyone's; k-tile kt-1-H_INFLIGHT is done
    int next = kt + H_STAGES - 1 - H_INFLIGHT;
    if (next < k_tiles) load_stage(smem + (next % H_STAGES) * H_STAGE_FLOATS, A, Bt, M, K, m0, next, t);
    cp_async_commit();

    const float* As = smem + (kt % H_STAGES) * H_STAGE_FLOATS;
    split_a<false>(As, r0, q, big, small);
    products(As + H_A_FLOATS, kt, k_tiles, acc, part, big, small);
}

// The block's tile of C: tiles in groups of H_GROUP tile rows, column by column, so that the blocks
// running at once share panels of A and B in L2 (version 7's WT_GROUP).
__device__ __forceinline__ void block_tile(int M, int N, int& m0, int& tn)
{
    int tiles_m = (M + H_BM - 1) / H_BM, tiles_n = (N + H_BN - 1) / H_BN;
    int id = blockIdx.x, per_group = H_GROUP * tiles_n;
    int first_row = (id / per_group) * H_GROUP;
    int rows = min(tiles_m - first_row, H_GROUP);
    m0 = (first_row + (id % per_group) % rows) * H_BM;
    tn = (id % per_group) / rows;
}

// d[4j + 0, 1] = C[r0][8j + 2q, +1], d[4j + 2, 3] = C[r0 + 8][...]
__device__ __forceinline__ void store_tile(float* C, int M, int N, int m0, int n0, int r0, int q, float (&acc)[64])
{
    int gm0 = m0 + r0, gm1 = gm0 + 8;
    bool pairs = (N % 2) == 0;
    #pragma unroll
    for (int j = 0; j < 16; ++j) {
        int gn = n0 + 8 * j + 2 * q;
        #pragma unroll
        for (int h = 0; h < 2; ++h) {
            int gm = h ? gm1 : gm0;
            if (gm >= M) continue;
            float x = acc[4 * j + 2 * h], y = acc[4 * j + 2 * h + 1];
            if (pairs && gn + 1 < N) {
                *reinterpret_cast<float2*>(C + (size_t)gm * N + gn) = make_float2(x, y);
            } else {
                if (gn < N) C[(size_t)gm * N + gn] = x;
                if (gn + 1 < N) C[(size_t)gm * N + gn + 1] = y;
            }
        }
    }
}

__global__ void __launch_bounds__(H_THREADS, 1)
sgemm_tf32x3_wgmma(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ Bp, float* C)
{
    extern __shared__ __align__(128) float smem[];
    int k_tiles = (K + H_BK - 1) / H_BK;
    int m0, tn;
    block_tile(M, N, m0, tn);
    int t = threadIdx.x, wg = t / 128, warp = (t / 32) % 4, lane = t % 32, g = lane / 4, q = lane % 4;
    const float* Bt = Bp + (size_t)tn * k_tiles * 2 * H_B_FLOATS;

    float acc[64];
#if H_PROMOTE
    float part[64];
#define SUMS part
#else
#define SUMS acc
#endif
    #pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;

    #pragma unroll
    for (int s = 0; s < H_STAGES - 1 - H_INFLIGHT; ++s) {
        if (s < k_tiles) load_stage(smem + s * H_STAGE_FLOATS, A, Bt, M, K, m0, s, t);
        cp_async_commit();
    }
    int r0 = wg * 64 + warp * 16 + g;                  // this thread's rows r0 and r0 + 8 of the tile
    // Two sets of A registers, for k-tiles kt and kt + 1: wgmma reads them while it runs, and with
    // H_INFLIGHT = 1 one k-tile's products are still running when the next one's A is split.
    unsigned big0[H_STEPS][4], small0[H_STEPS][4], big1[H_STEPS][4], small1[H_STEPS][4];
    for (int kt = 0; kt < k_tiles; kt += 2) {
        k_tile(smem, A, Bt, M, K, m0, kt, k_tiles, t, r0, q, acc, SUMS, big0, small0);
        if (kt + 1 < k_tiles) k_tile(smem, A, Bt, M, K, m0, kt + 1, k_tiles, t, r0, q, acc, SUMS, big1, small1);
    }
    // Every product has finished before the sums are read.  Without this wait on every path out of the
    // loop, ptxas cannot prove it and adds a wait for all products at the end of every loop iteration
    // instead (its note C7517).
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    #pragma unroll
    for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(acc[i]) :: "memory");
    store_tile(C, M, N, m0, tn * H_BN, r0, q, acc);
}

// ================================================================================================
// Version 11: the same products, fed by the Tensor Memory Accelerator (TMA) and paced by mbarriers.
//
// Version 10's tensor cores are busy about half of the time (the profiler's figures in the chapter): its
// warps wait at the __syncthreads that ends every k-tile, and behind the cp.async copies every thread
// issues for later stages.  Here
//   * tf32x3_pack_a first stores A tile by tile (zero-padded, each tile's rows permuted as
//     a_packed_offset says), as tf32x3_split_b stores B: a stage is then two contiguous blocks, A's
//     16 KB and B_big's and B_small's 32 KB;
//   * one thread (thread 0, which also multiplies) issues each stage as two bulk copies that the TMA
//     unit carries out on its own;
//   * a stage is "full" when its bytes have landed: the copies count them down on the stage's full
//     mbarrier, on which every thread waits before reading the stage;
//   * a stage is "empty" when every warp's products that read it are done: each warp arrives on the
//     stage's empty mbarrier, and thread 0 waits for all of them before refilling it.
// A warpgroup waits only for its own data and, through thread 0, for a stage H_STAGES - 1 k-tiles old:
// no barrier holds both warpgroups in step.

#define T_A_FLOATS (H_BM * H_BK)                        // A's tile in a stage: no padding
#define T_STAGE_FLOATS (T_A_FLOATS + 2 * H_B_FLOATS)

// A -> its tiles, in the product kernel's order ([tile row][k-tile][row][column], zeros past M and K).
// Block (kt, mt) packs one tile; a warp reads 32 consecutive floats of a row and writes them to one
// 128-byte row, permuted.
__global__ void __launch_bounds__(256)
tf32x3_pack_a(const float* __restrict__ A, int M, int K, float* __restrict__ Ap)
{
    int kt = blockIdx.x, mt = blockIdx.y;
    float* out = Ap + ((size_t)mt * gridDim.x + kt) * T_A_FLOATS;
    for (int e = threadIdx.x; e < T_A_FLOATS; e += blockDim.x) {
        int r = e / H_BK, c = e % H_BK;
        int gm = mt * H_BM + r, gk = kt * H_BK + c;
        out[a_packed_offset(r, c)] = (gm < M && gk < K) ? A[(size_t)gm * K + gk] : 0.0f;
    }
}

__device__ __forceinline__ unsigned shared_address(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mbarrier_init(unsigned long long* bar, unsigned arrivals)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(shared_address(bar)), "r"(arrivals) : "memory");
}
__device__ __forceinline__ void mbarrier_arrive(unsigned long long* bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(shared_address(bar)) : "memory");
}
// Arrive, and tell the barrier how many bytes the copies of this phase will bring.
__device__ __forceinline__ void mbarrier_arrive_expect(unsigned long long* bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(shared_address(bar)), "r"(bytes)
                 : "memory");
}
// Wait until the barrier's phase of this parity has completed.
__device__ __forceinline__ void mbarrier_wait(unsigned long long* bar, unsigned parity)
{
    asm volatile("{\n.reg .pred done;\nWAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra WAIT;\n}\n" :: "r"(shared_address(bar)), "r"(parity) : "memory");
}
// Copy `bytes` (a multiple of 16, both addresses 16-byte aligned) from global to shared memory on the
// TMA unit; their arrival counts down the transaction bytes of `bar`.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, unsigned long long* bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 :: "r"(shared_address(dst)), "l"(src), "r"(bytes), "r"(shared_address(bar)) : "memory");
}

// Thread 0 fills stage kt % H_STAGES (empty) with k-tile kt of the block's packed A and split B.
__device__ __forceinline__ void tma_stage(float* smem, unsigned long long* full, const float* At, const float* Bt,
                                          int kt)
{
    int slot = kt % H_STAGES;
    float* stage = smem + slot * T_STAGE_FLOATS;
    mbarrier_arrive_expect(&full[slot], T_STAGE_FLOATS * 4);
    bulk_copy(stage, At + (size_t)kt * T_A_FLOATS, T_A_FLOATS * 4, &full[slot]);
    bulk_copy(stage + T_A_FLOATS, Bt + (size_t)kt * 2 * H_B_FLOATS, 2 * H_B_FLOATS * 4, &full[slot]);
}

__device__ __forceinline__ void tma_k_tile(float* smem, unsigned long long* full, unsigned long long* empty,
                                           const float* At, const float* Bt, int kt, int k_tiles, int t, int r0,
                                           int q, float (&acc)[64], float (&part)[64],
                                           unsigned (&big)[H_STEPS][4], unsigned (&small)[H_STEPS][4])
{
    int slot = kt % H_STAGES;
    mbarrier_wait(&full[slot], (kt / H_STAGES) & 1);
    const float* stage = smem + slot * T_STAGE_FLOATS;
    split_a<true>(stage, r0, q, big, small);
    products(stage + T_A_FLOATS, kt, k_tiles, acc, part, big, small);
    // This warp's products of k-tile kt - 1 are done (and its reads of kt - 1's A long before): its
    // stage may be refilled once every warp says so.  Thread 0 refills it with k-tile kt + H_STAGES - 1
    // (at kt = 0 that stage has not been used yet).
    int old = (kt + H_STAGES - 1) % H_STAGES, next = kt + H_STAGES - 1;
    if (kt > 0 && t % 32 == 0) mbarrier_arrive(&empty[old]);
    if (t == 0 && next < k_tiles) {
        if (kt > 0) mbarrier_wait(&empty[old], ((kt - 1) / H_STAGES) & 1);
        tma_stage(smem, full, At, Bt, next);
    }
}

__global__ void __launch_bounds__(H_THREADS, 1)
sgemm_tf32x3_tma(int M, int N, int K, const float* __restrict__ Ap, const float* __restrict__ Bp, float* C)
{
    extern __shared__ __align__(128) float smem[];
    unsigned long long* full = reinterpret_cast<unsigned long long*>(smem + H_STAGES * T_STAGE_FLOATS);
    unsigned long long* empty = full + H_STAGES;
    int k_tiles = (K + H_BK - 1) / H_BK;
    int m0, tn;
    block_tile(M, N, m0, tn);
    int t = threadIdx.x, wg = t / 128, warp = (t / 32) % 4, lane = t % 32, g = lane / 4, q = lane % 4;
    const float* At = Ap + (size_t)(m0 / H_BM) * k_tiles * T_A_FLOATS;
    const float* Bt = Bp + (size_t)tn * k_tiles * 2 * H_B_FLOATS;

    if (t == 0) {
        for (int s = 0; s < H_STAGES; ++s) {
            mbarrier_init(&full[s], 1);                // thread 0's arrival (with the bytes to expect)
            mbarrier_init(&empty[s], H_THREADS / 32);  // one arrival per warp
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (t == 0) {
        for (int s = 0; s < H_STAGES - 1 && s < k_tiles; ++s) tma_stage(smem, full, At, Bt, s);
    }

    float acc[64];
#if H_PROMOTE
    float part[64];
#endif
    #pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
    int r0 = wg * 64 + warp * 16 + g;
    unsigned big0[H_STEPS][4], small0[H_STEPS][4], big1[H_STEPS][4], small1[H_STEPS][4];
    for (int kt = 0; kt < k_tiles; kt += 2) {
        tma_k_tile(smem, full, empty, At, Bt, kt, k_tiles, t, r0, q, acc, SUMS, big0, small0);
        if (kt + 1 < k_tiles) tma_k_tile(smem, full, empty, At, Bt, kt + 1, k_tiles, t, r0, q, acc, SUMS, big1, small1);
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");   // as in version 10
    #pragma unroll
    for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(acc[i]) :: "memory");
    store_tile(C, M, N, m0, tn * H_BN, r0, q, acc);
}
