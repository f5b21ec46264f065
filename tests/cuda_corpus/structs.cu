// Structs and the built-in vector types taken by value, the ways kernels pass small
// parameter packs: a params struct instead of a long argument list, a bias as a float4,
// a complex scale as a float2, tensor shapes as int2/uint3, a struct by const reference
// and as a __grid_constant__.  Their layouts (alignment and padding) are nvcc's.
#include <cuda_fp16.h>

struct Affine {
    float scale;
    float shift;
};

__global__ void affine(const float* x, float* y, Affine a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a.scale * x[i] + a.shift;
}

// padding: a char, then a float4 at offset 16, then a double at 32
typedef struct {
    char relu;
    float4 clip;
    double eps;
    int3 pad;
} LayerParams;

__global__ void clip_normalize(const float* x, float* y, LayerParams p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = (x[i] - p.clip.z) / (float)(p.clip.w + p.eps);
    v = fminf(fmaxf(v, p.clip.x), p.clip.y);
    if (p.relu) v = fmaxf(v, 0.0f);
    y[i] = v + (float)(p.pad.x + p.pad.y + p.pad.z);
}

__global__ void add_bias4(float4* data, float4 bias, int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = data[i];
        v.x += bias.x; v.y += bias.y; v.z += bias.z; v.w += bias.w;
        data[i] = v;
    }
}

// complex numbers as float2: z * w
__global__ void complex_scale(const float2* z, float2* out, float2 w, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float2 a = z[i];
        out[i] = make_float2(a.x * w.x - a.y * w.y, a.x * w.y + a.y * w.x);
    }
}

// a row-major index map of a rows x cols shape
__global__ void index_map(int* out, int2 shape) {
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < shape.x && c < shape.y) out[r * shape.y + c] = r * 1000 + c;
}

__global__ void volume_sum_z(const float* v, float* out, uint3 dims) {
    unsigned x = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned y = blockIdx.y;
    if (x >= dims.x || y >= dims.y) return;
    float s = 0.0f;
    for (unsigned z = 0; z < dims.z; ++z) s += v[(z * dims.y + y) * dims.x + x];
    out[y * dims.x + x] = s;
}

namespace nn {
struct Shape4 {
    int n, c, h, w;
};

// NCHW -> NHWC with the shape as a struct passed by const reference
__global__ void nchw_to_nhwc(const float* in, float* out, const Shape4& s) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int total = s.n * s.c * s.h * s.w;
    if (i >= total) return;
    int w = i % s.w, h = i / s.w % s.h, c = i / (s.w * s.h) % s.c, n = i / (s.w * s.h * s.c);
    out[((n * s.h + h) * s.w + w) * s.c + c] = in[i];
}
}  // namespace nn

// a small filter bank by value, read-only in parameter space
struct Taps {
    float w[5];
    int radius;
};

__global__ void conv1d_taps(const float* x, float* y, const __grid_constant__ Taps taps, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.0f;
    for (int k = -taps.radius; k <= taps.radius; ++k) {
        int j = i + k;
        if (j >= 0 && j < n) acc += taps.w[k + taps.radius] * x[j];
    }
    y[i] = acc;
}

template <typename T>
struct Range {
    T lo, hi;
};

template <typename T>
__global__ void clamp_range(T* x, Range<T> r, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] < r.lo ? r.lo : (x[i] > r.hi ? r.hi : x[i]);
}

// a particle array of structs, and a struct by value with a double
struct Particle {
    float3 pos;
    float mass;
};

struct Step {
    double dt;
    float3 gravity;
};

__global__ void integrate(Particle* ps, float3* vel, Step step, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float dt = (float)step.dt;
    vel[i].x += step.gravity.x * dt; vel[i].y += step.gravity.y * dt; vel[i].z += step.gravity.z * dt;
    ps[i].pos.x += vel[i].x * dt; ps[i].pos.y += vel[i].y * dt; ps[i].pos.z += vel[i].z * dt;
}

__global__ void scale_half2(__half2* x, __half2 s, int n2) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n2) x[i] = __hmul2(x[i], s);
}
