// Kernels that measure the device's limits, not kernels to learn from.
//
//   fma_throughput: each thread runs CHAINS independent chains of fused
//   multiply-adds, a = a * multiplier + addend, `iterations` times, and
//   writes the sum of its chains so that the compiler cannot drop the work.
//   Independent chains let a warp issue a new FMA every cycle instead of
//   waiting the FMA latency (about 4 cycles) for its previous result; with
//   enough warps per multiprocessor the FP32 units are never idle.
//   Flops = threads * iterations * CHAINS * 2.
//
// Memory bandwidth is measured with copy.cu's copy_grid_stride_float4.
// See kernels/runtime/roofline.py.

#define FMA_CHAINS 8

__global__ void fma_throughput(float* out, int iterations, float multiplier,
                               float addend) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    float acc[FMA_CHAINS];
#pragma unroll
    for (int c = 0; c < FMA_CHAINS; ++c) {
        acc[c] = t * 1e-7f + c;
    }
#pragma unroll 4
    for (int it = 0; it < iterations; ++it) {
#pragma unroll
        for (int c = 0; c < FMA_CHAINS; ++c) {
            acc[c] = fmaf(acc[c], multiplier, addend);
        }
    }
    float total = 0.0f;
#pragma unroll
    for (int c = 0; c < FMA_CHAINS; ++c) {
        total += acc[c];
    }
    out[t] = total;
}
