%%cuda reduce_sum block=256
// expect: still 0|is 0|no code was written
// planted bug: computes nothing, writes nothing
__global__ void reduce_sum(const float* x, float* out, int n) {
}
