// kernels/conv/im2col.cu -- unrolling ("im2col") the input of a convolution layer into a matrix.
//
// A convolution layer with C input maps of H x W, M output maps and K x K filters (zero padding
// `pad`, stride `stride`) produces output maps of H_out x W_out with
//   H_out = (H + 2*pad - K) / stride + 1,   W_out = (W + 2*pad - K) / stride + 1.
// Unrolling one sample gives the (C*K*K) x (H_out*W_out) matrix U whose column p = h*W_out + w holds
// every input value output pixel (h, w) needs, in the order of the filter weights:
//   U[c*K*K + i*K + j][h*W_out + w] = X[c][h*stride - pad + i][w*stride - pad + j]   (0 outside X).
// Then every output map is one row of  Y = Wmat U,  with Wmat the M x (C*K*K) filter matrix (the
// filters of PyTorch's (M, C, K, K) weight tensor, each flattened to a row).
//
// Versions:
//   1. im2col_unroll   one thread per (sample, input channel, output pixel); it gathers the K*K
//                      values of that channel that the pixel needs and writes them down column p of
//                      U.  Consecutive threads have consecutive pixels p, so each of the K*K writes
//                      of a warp is one contiguous 128-byte row segment (coalesced), and the reads
//                      of neighbouring threads hit neighbouring (cached) input values.
//
//   2. im2col_unroll_vec4
//                      one thread per (sample, input channel, 4 consecutive output pixels): each of
//                      its K*K rows is written with one 16-byte store (when H_out*W_out is a multiple
//                      of 4; four 4-byte stores otherwise), and the index arithmetic is shared by four
//                      pixels.  A quarter of the store instructions and of the divisions.
//
// Both unroll `count` samples starting at sample `n0` of X (N x C x H x W) into U, laid out as
// `count` matrices one after another: U[s][row][p] for s < count.  Unrolling a few samples at a time
// bounds the memory U needs: it is K*K/stride^2 times the input, about 9x for 3x3 filters.

__global__ void im2col_unroll(const float* X, float* U, int n0, int count, int C, int H, int W,
                              int K, int pad, int stride, int H_out, int W_out)
{
    // 32-bit index arithmetic (the launcher keeps count*C*H_out*W_out below 2^31): a 64-bit
    // division costs several times a 32-bit one, and this kernel has little else to do.
    int P = H_out * W_out;                                       // output pixels = columns of U
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count * C * P) return;
    int p = t % P;                                               // output pixel (fastest: coalesced)
    int c = (t / P) % C;                                         // input channel
    int s = t / (P * C);                                         // sample within this chunk
    int h = p / W_out, w = p % W_out;
    const float* x = X + ((long long)(n0 + s) * C + c) * H * W;  // input map (n0 + s, c)
    float* u = U + ((long long)s * C * K * K + (long long)c * K * K) * P + p;  // row c*K*K, column p
    int h0 = h * stride - pad, w0 = w * stride - pad;            // top-left of the receptive field
    for (int i = 0; i < K; ++i) {
        int hi = h0 + i;
        bool row_in = hi >= 0 && hi < H;
        for (int j = 0; j < K; ++j) {
            int wj = w0 + j;
            u[(i * K + j) * P] = (row_in && wj >= 0 && wj < W) ? x[hi * W + wj] : 0.0f;
        }
    }
}

// 2. Four pixels per thread, 16-byte stores.
__global__ void im2col_unroll_vec4(const float* X, float* U, int n0, int count, int C, int H, int W,
                                   int K, int pad, int stride, int H_out, int W_out)
{
    int P = H_out * W_out;
    int groups = (P + 3) / 4;                                    // groups of 4 pixels per map
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count * C * groups) return;
    int g = t % groups, c = (t / groups) % C, s = t / (groups * C);
    int p0 = 4 * g;
    const float* x = X + ((long long)(n0 + s) * C + c) * H * W;
    float* u = U + ((long long)s * C * K * K + (long long)c * K * K) * P + p0;
    // Top-left corner of each pixel's receptive field (pixels past P: never stored).
    int h0[4], w0[4];
    int h = p0 / W_out, w = p0 % W_out;
    #pragma unroll
    for (int q = 0; q < 4; ++q) {
        h0[q] = h * stride - pad;
        w0[q] = w * stride - pad;
        if (++w == W_out) { w = 0; ++h; }                        // the next pixel may start a new row
    }
    bool vector_store = (P % 4) == 0;                            // then u is 16-byte aligned
    for (int i = 0; i < K; ++i) {
        for (int j = 0; j < K; ++j) {
            float v[4];
            #pragma unroll
            for (int q = 0; q < 4; ++q) {
                int hi = h0[q] + i, wj = w0[q] + j;
                v[q] = (hi >= 0 && hi < H && wj >= 0 && wj < W) ? x[hi * W + wj] : 0.0f;
            }
            float* row = u + (i * K + j) * P;
            if (vector_store) {
                *reinterpret_cast<float4*>(row) = make_float4(v[0], v[1], v[2], v[3]);
            } else {
                #pragma unroll
                for (int q = 0; q < 4; ++q)
                    if (p0 + q < P) row[q] = v[q];
            }
        }
    }
}
