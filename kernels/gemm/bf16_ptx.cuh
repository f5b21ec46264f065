// kernels/gemm/bf16_ptx.cuh -- the PTX instructions that versions 13 to 16 of kernels/gemm/sgemm_bf16.cu use,
// each wrapped once in a small inline function (CUDA C has no wrapper for most of them).
//
// Included by sgemm_bf16.cu only when it is built for sm_90a (the define DLK_ARCH_SPECIFIC): the CPU emulator
// runs CUDA C as C++ and cannot run assembly, and it never opens this file.
//
//   cp.async                           version 13 (the Ampere way: every thread copies, every warp multiplies), whose
//                                      ldmatrix and mma.sync are kernels/warp_mma.cuh's, shared with attention
//   mbarrier, cp.async.bulk.tensor     versions 14 to 16: the TMA unit copies tiles described by a tensor map
//   wgmma                              versions 14 to 16: a warpgroup's products, operands in shared memory
//   setmaxnreg, cluster barriers, mapa versions 15 and 16: warp specialisation and thread-block clusters
//   st.async                           versions 15 and 16 split along K: partial sums into the partner block
#pragma once

#include "warp_mma.cuh"   // shared_address, ldmatrix_x4, mma_m16n8k16

// ------------------------------------------------------------------------------------------------ version 13
// Copy 16 bytes from global to shared memory without passing through registers; src_bytes = 0 writes zeros
// (a chunk past the edge of A or B).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(shared_address(dst)), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

// ------------------------------------------------------------------------------------------------ mbarriers
__device__ __forceinline__ void mbarrier_init(unsigned long long* bar, unsigned arrivals)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(shared_address(bar)), "r"(arrivals) : "memory");
}
// The initialised barriers, visible to the other threads of the cluster and to the TMA unit.
__device__ __forceinline__ void mbarrier_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }

__device__ __forceinline__ void mbarrier_arrive(unsigned long long* bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(shared_address(bar)) : "memory");
}
// Arrive on the barrier at the same place in the shared memory of block `rank` of this cluster.  With the default
// semantics (release at the scope of the block): spelled .release.cluster, ptxas puts a GPU-wide memory fence
// before every arrival, which waits for the warp's products in flight.
__device__ __forceinline__ void mbarrier_arrive_cluster(unsigned long long* bar, unsigned rank)
{
    asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n"
                 :: "r"(shared_address(bar)), "r"(rank) : "memory");
}
// Arrive, and tell the barrier how many bytes the copies of this phase will bring.
__device__ __forceinline__ void mbarrier_arrive_expect(unsigned long long* bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(shared_address(bar)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ bool mbarrier_try_wait(unsigned long long* bar, unsigned parity)
{
    unsigned done;
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(shared_address(bar)), "r"(parity) : "memory");
    return done != 0;
}
// Wait until the barrier's phase of this parity has completed.  With BF_WATCHDOG a wait of more than about
// ten seconds stops the kernel with an error (a pipeline that waits for a copy never issued would hang the GPU).
__device__ __forceinline__ void mbarrier_wait(unsigned long long* bar, unsigned parity)
{
#if BF_WATCHDOG
    long long start = clock64();
    while (!mbarrier_try_wait(bar, parity)) {
        if (clock64() - start > 20000000000LL) __trap();
    }
#else
    while (!mbarrier_try_wait(bar, parity)) {
    }
#endif
}

// ------------------------------------------------------------------------------------------------ TMA
// The box that tensor map `map` describes, at (column c0, row c1, matrix c2), into shared memory at dst; its
// bytes count down `bar`.  `map` is its generic address (here in global memory).
__device__ __forceinline__ void tma_load(void* dst, const void* map, unsigned long long* bar, int c0, int c1, int c2)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5}], [%2];\n"
                 :: "r"(shared_address(dst)), "l"(map), "r"(shared_address(bar)), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}
// The same box into the shared memory of every block of the cluster in `blocks` (a bit per rank), at the same
// place in each, counting down the barrier at the same place in each.
__device__ __forceinline__ void tma_load_multicast(void* dst, const void* map, unsigned long long* bar, int c0,
                                                   int c1, int c2, unsigned short blocks)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%3, %4, %5}], [%2], %6;\n"
                 :: "r"(shared_address(dst)), "l"(map), "r"(shared_address(bar)), "r"(c0), "r"(c1), "r"(c2),
                    "h"(blocks)
                 : "memory");
}

// The box of `map` at (c0, c1, c2) from shared memory at src to global memory, as a bulk group of this thread
// (boxes reaching past the matrix's edges are cut there).
__device__ __forceinline__ void tma_store(const void* map, const void* src, int c0, int c1, int c2)
{
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n"
                 :: "l"(map), "r"(shared_address(src)), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// This thread's bulk groups have read their shared memory (it may be written again).
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
__device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
// Shared memory written by ordinary stores, made visible to the TMA unit (the async proxy).
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// A barrier for `threads` threads (a warpgroup) on hardware barrier `id` (0 is __syncthreads').
__device__ __forceinline__ void named_barrier(int id, int threads)
{
    asm volatile("bar.sync %0, %1;\n" :: "r"(id), "r"(threads) : "memory");
}

// ------------------------------------------------------------------------------------------------ wgmma
// A matrix descriptor for a K-major tile in shared memory written by the TMA unit with the 128-byte swizzle:
// rows of 64 BF16 values (128 bytes), 8-row groups 1024 bytes apart, the 16-byte pieces of row r permuted by
// XOR with r % 8.  `p` is where the k16 step starts: the tile's start (1024-byte aligned) + 32 bytes a step.
__device__ __forceinline__ unsigned long long swizzled_descriptor(const void* p)
{
    return (unsigned long long)((shared_address(p) & 0x3FFFF) >> 4)
         | (1ull << 16)                       // leading byte offset (16 bytes; unused with this swizzle)
         | ((unsigned long long)(1024 >> 4) << 32)
         | (1ull << 62);                      // the 128-byte swizzle
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory"); }
// The accumulators are read by ordinary instructions only after this (they belong to wgmma until then).
template <int N> __device__ __forceinline__ void wgmma_release(float (&d)[N])
{
    #pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}

// d += A B for one k16 step of a 64 x 256 tile: A and B (K-major, 128-byte swizzle) from shared memory.
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], unsigned long long a, unsigned long long b, int accumulate)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127} "
        ", %128, %129, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(a), "l"(b), "r"(accumulate));
}

// d += A B for one k16 step of a 64 x 128 tile: A and B (K-major, 128-byte swizzle) from shared memory.
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], unsigned long long a, unsigned long long b, int accumulate)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63} "
        ", %64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(a), "l"(b), "r"(accumulate));
}

// d += A B for one k16 step of a 64 x 64 tile (versions 15 and 16 on small products: twice the tiles of 64 x 128).
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], unsigned long long a, unsigned long long b, int accumulate)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31} "
        ", %32, %33, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(a), "l"(b), "r"(accumulate));
}

// tanh(x) by the special-function unit, one instruction (relative error about 2^-11, below BF16's 2^-9).
__device__ __forceinline__ float tanh_approx(float x)
{
    float y;
    asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// ------------------------------------------------------------------------------------------------ warps, clusters
// Hand registers back (producers) or take more (consumers): each warpgroup's limit, for the rest of the kernel.
template <int REGISTERS> __device__ __forceinline__ void registers_decrease()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(REGISTERS));
}
template <int REGISTERS> __device__ __forceinline__ void registers_increase()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(REGISTERS));
}
__device__ __forceinline__ unsigned cluster_rank()
{
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    return rank;
}
// The address in the cluster's shared memory window of what lies at `p` in the shared memory of block `rank`.
__device__ __forceinline__ unsigned cluster_address(const void* p, unsigned rank)
{
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(shared_address(p)), "r"(rank));
    return remote;
}
// Four floats into another block's shared memory (`dst`, `bar` from cluster_address): the store counts its 16 bytes
// down that block's barrier `bar`, as a TMA copy does, so the block waiting there needs no other signal and no fence.
__device__ __forceinline__ void st_async_v4(unsigned dst, float x, float y, float z, float w, unsigned bar)
{
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];\n"
                 :: "r"(dst), "f"(x), "f"(y), "f"(z), "f"(w), "r"(bar) : "memory");
}
// Every thread of every block of the cluster arrives, then waits for all of them.
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
