// %%cuda lsoftmax_patch_logits block=256 grid=32
// Bug: only the label's logit is written; the others keep the NaN the output was filled with.
// Expect: rejected, wrong_result
__global__ void lsoftmax_patch_logits(const float* logits, const int* labels, const float* x_norm, const float* w_norm, float* out, int batch, int classes, int m, float lam)
{
    long long total = (long long)batch * classes;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total; e += (long long)gridDim.x * blockDim.x) {
        int i = (int)(e / classes), j = (int)(e % classes);
        float f = logits[e];
        if (j == labels[i]) {
            float a = w_norm[j], b = x_norm[i];
            float c = f / (fmaxf(a, 1e-12f) * fmaxf(b, 1e-12f));
            c = fminf(1.0f, fmaxf(-1.0f, c));
            float t0 = 1.0f, t1 = c;
            for (int p = 1; p < m; ++p) { float t2 = 2.0f * c * t1 - t0; t0 = t1; t1 = t2; }
            int k = 0;
            for (int q = 1; q < m; ++q) k += c < cospif((float)q / (float)m);
            float psi = ((k & 1) ? -t1 : t1) - 2.0f * k;
            f = (lam * f + a * b * psi) / (1.0f + lam);
        }
        if (j == labels[i]) out[e] = f;
    }
}
