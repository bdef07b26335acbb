#include "gelu_erf.h"

#include <cstdint>

#include "custom_op.h"

namespace {

// Abramowitz & Stegun 7.1.28: for z >= 0, erfc(z) = 1 / (1 + a1 z + ... + a6 z^6)^16 with an
// absolute error below 3e-7. Only multiplies and one division, so the loop vectorises; and erfc
// comes out directly, without the cancellation of 1 - erf on the negative side.
constexpr float kA1 = 0.0705230784f;
constexpr float kA2 = 0.0422820123f;
constexpr float kA3 = 0.0092705272f;
constexpr float kA4 = 0.0001520143f;
constexpr float kA5 = 0.0002765672f;
constexpr float kA6 = 0.0000430638f;
constexpr float kInvSqrt2 = 0.70710678118654752f;

OV_SIMD_CLONES
void gelu_erf_row(float * y, const float * x, const float * bias, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i] + (bias ? bias[i] : 0.0f);
        const float z = (v < 0.0f ? -v : v) * kInvSqrt2;
        float p = 1.0f + z * (kA1 + z * (kA2 + z * (kA3 + z * (kA4 + z * (kA5 + z * kA6)))));
        p *= p;  // ^2
        p *= p;  // ^4
        p *= p;  // ^8
        p *= p;  // ^16
        const float erfc = 1.0f / p;
        // GELU(v) = v * Phi(v); Phi(v) = 1 - erfc(|v|/sqrt2)/2 for v >= 0, erfc(|v|/sqrt2)/2 below.
        const float phi = v < 0.0f ? 0.5f * erfc : 1.0f - 0.5f * erfc;
        y[i] = v * phi;
    }
}

// ggml custom op: dst->src = {x, bias or absent}; thread ith of nth takes a range of rows.
void gelu_erf_compute(ggml_tensor * dst, int ith, int nth, void * /*userdata*/) {
    const float * x = (const float *) dst->src[0]->data;
    const float * bias = dst->src[1] ? (const float *) dst->src[1]->data : nullptr;
    const int64_t n = dst->ne[0], n_rows = ggml_nrows(dst);
    int64_t r0, r1;
    ov_thread_range(n_rows, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) gelu_erf_row((float *) dst->data + r * n, x + r * n, bias, n);
}

}  // namespace

ggml_tensor * ov_gelu_erf(ggml_context * ctx, ggml_tensor * x, ggml_tensor * bias) {
    GGML_ASSERT(x->type == GGML_TYPE_F32 && ggml_is_contiguous(x));
    GGML_ASSERT(!bias || (bias->type == GGML_TYPE_F32 && ggml_nelements(bias) == x->ne[0]));
    ggml_tensor * args[] = {x, bias};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, x->ne[0], x->ne[1], x->ne[2], x->ne[3], args, bias ? 2 : 1,
                          gelu_erf_compute, GGML_N_TASKS_MAX, nullptr);
}
