// TF32 tensor cores through the WMMA API (sm_80+), in the style of CUDA's tf32TensorCoreGemm
// sample and of "3xTF32" float-accuracy GEMMs.  Run as written by tests/test_cuda_corpus.py.
#include <mma.h>
#include <type_traits>
using namespace nvcuda;

typedef wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> tf32_a;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> tf32_b;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> tf32_b_col;
typedef wmma::fragment<wmma::accumulator, 16, 16, 8, float> tf32_acc;

__global__ void tf32_round(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = wmma::__float_to_tf32(x[i]);
}

// one warp per 16x16 tile of C = A B (A is M x K, B is K x N, both row-major; M, N multiples of 16,
// K of 8); with convert != 0 each loaded element is rounded to TF32 first, as CUDA's sample does
__global__ void tf32_gemm(const float* A, const float* B, float* C, int M, int N, int K, int convert) {
    // a tf32 fragment's element_type is the tag, its elements are floats
    static_assert(std::is_same<tf32_a::element_type, wmma::precision::tf32>::value, "element_type");
    static_assert(std::is_same<tf32_a::storage_element_type, float>::value, "storage_element_type");
    static_assert(std::is_same<std::remove_reference<decltype(std::declval<tf32_a&>().x[0])>::type, float>::value, "x[i]");
    int tile_row = blockIdx.y * 16, tile_col = blockIdx.x * 16;
    tf32_a a;
    tf32_b b;
    tf32_acc acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < K; k += 8) {
        wmma::load_matrix_sync(a, A + tile_row * K + k, K);
        wmma::load_matrix_sync(b, B + k * N + tile_col, N);
        if (convert) {
            for (int i = 0; i < a.num_elements; i++) a.x[i] = wmma::__float_to_tf32(a.x[i]);
            for (int i = 0; i < b.num_elements; i++) b.x[i] = wmma::__float_to_tf32(b.x[i]);
        }
        wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(C + tile_row * N + tile_col, acc, N, wmma::mem_row_major);
}

// 3xTF32: x = big + small with big = tf32(x), small = tf32(x - big); C += a_small b_big + a_big b_small
// + a_big b_big (the small terms first, the a_small b_small term dropped).  B is given transposed
// (N x K, row-major), so it is read as a column-major K x N matrix.
__global__ void tf32x3_gemm(const float* A, const float* Bt, float* C, int M, int N, int K) {
    int tile_row = blockIdx.y * 16, tile_col = blockIdx.x * 16;
    tf32_a a_big, a_small;
    tf32_b_col b_big, b_small;
    tf32_acc acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < K; k += 8) {
        wmma::load_matrix_sync(a_big, A + tile_row * K + k, K);
        wmma::load_matrix_sync(b_big, Bt + tile_col * K + k, K);
#pragma unroll
        for (int i = 0; i < a_big.num_elements; i++) {
            float x = a_big.x[i];
            a_big.x[i] = wmma::__float_to_tf32(x);
            a_small.x[i] = wmma::__float_to_tf32(x - a_big.x[i]);
        }
#pragma unroll
        for (int i = 0; i < b_big.num_elements; i++) {
            float x = b_big.x[i];
            b_big.x[i] = wmma::__float_to_tf32(x);
            b_small.x[i] = wmma::__float_to_tf32(x - b_big.x[i]);
        }
        wmma::mma_sync(acc, a_small, b_big, acc);
        wmma::mma_sync(acc, a_big, b_small, acc);
        wmma::mma_sync(acc, a_big, b_big, acc);
    }
    wmma::store_matrix_sync(C + tile_row * N + tile_col, acc, N, wmma::mem_row_major);
}
