#include "norm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "custom_op.h"

namespace {

void * pack_eps(float eps) {
    uint32_t bits;
    std::memcpy(&bits, &eps, sizeof(bits));
    return (void *) (uintptr_t) bits;
}

float unpack_eps(void * userdata) {
    const uint32_t bits = (uint32_t) (uintptr_t) userdata;
    float eps;
    std::memcpy(&eps, &bits, sizeof(eps));
    return eps;
}

// Mean and biased variance of n values, accumulated in double.
OV_SIMD_CLONES
void moments(const float * x, int64_t n, double * mean, double * var) {
    double s = 0.0, s2 = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        s += x[i];
        s2 += (double) x[i] * x[i];
    }
    *mean = s / (double) n;
    *var = std::max(s2 / (double) n - *mean * *mean, 0.0);
}

OV_SIMD_CLONES
void normalize_row(float * y, const float * x, const float * w, const float * b, float mean, float rstd, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * rstd * w[i] + b[i];
}

OV_SIMD_CLONES
void add_rows(float * v, const float * x, const float * x_bias, const float * residual, int64_t n) {
    for (int64_t i = 0; i < n; ++i) v[i] = (x[i] + (x_bias ? x_bias[i] : 0.0f)) + (residual ? residual[i] : 0.0f);
}

// dst: [C, T]; src: x, weight, bias, residual or absent, x_bias or absent; userdata: eps.
// Thread ith of nth owns a range of time steps.
void layer_norm_compute(ggml_tensor * dst, int ith, int nth, void * userdata) {
    const ggml_tensor * x = dst->src[0];
    const float * weight = (const float *) dst->src[1]->data;
    const float * bias = (const float *) dst->src[2]->data;
    const ggml_tensor * residual = dst->src[3];
    const float * x_bias = dst->src[4] ? (const float *) dst->src[4]->data : nullptr;
    const float eps = unpack_eps(userdata);
    const int64_t n_ch = x->ne[0], n_t = x->ne[1];
    int64_t t0, t1;
    ov_thread_range(n_t, ith, nth, &t0, &t1);
    std::vector<float> sum(n_ch);
    for (int64_t t = t0; t < t1; ++t) {
        const float * src = (const float *) ((const char *) x->data + t * x->nb[1]);
        if (residual || x_bias) {
            const float * res =
                residual ? (const float *) ((const char *) residual->data + t * residual->nb[1]) : nullptr;
            add_rows(sum.data(), src, x_bias, res, n_ch);
            src = sum.data();
        }
        double mean, var;
        moments(src, n_ch, &mean, &var);
        normalize_row((float *) ((char *) dst->data + t * dst->nb[1]), src, weight, bias, (float) mean,
                      (float) (1.0 / std::sqrt(var + eps)), n_ch);
    }
}

// acc[c] += x[c] and acc2[c] += x[c]^2 over one time step's channels, in double: the sums run
// over tens of thousands of steps.
OV_SIMD_CLONES
void accumulate(double * acc, double * acc2, const float * x, int64_t n) {
    for (int64_t c = 0; c < n; ++c) {
        const double v = x[c];
        acc[c] += v;
        acc2[c] += v * v;
    }
}

OV_SIMD_CLONES
void scale_shift(float * y, const float * x, const float * scale, const float * shift, int64_t n) {
    for (int64_t c = 0; c < n; ++c) y[c] = x[c] * scale[c] + shift[c];
}

// dst: [C, T]; src: x, weight, bias; userdata: eps. Thread ith of nth owns a range of channels
// and walks every time step for it.
void channel_norm_compute(ggml_tensor * dst, int ith, int nth, void * userdata) {
    const ggml_tensor * x = dst->src[0];
    const float * weight = (const float *) dst->src[1]->data;
    const float * bias = (const float *) dst->src[2]->data;
    const float eps = unpack_eps(userdata);

    const int64_t n_ch = x->ne[0], n_t = x->ne[1];
    int64_t c0, c1;
    ov_thread_range(n_ch, ith, nth, &c0, &c1);
    const int64_t n = c1 - c0;
    if (n <= 0) return;

    std::vector<double> sum(n, 0.0), sum2(n, 0.0);
    for (int64_t t = 0; t < n_t; ++t) {
        accumulate(sum.data(), sum2.data(), (const float *) ((const char *) x->data + t * x->nb[1]) + c0, n);
    }
    // y = x * scale + shift with scale = w / sqrt(var + eps), shift = b - mean * scale
    std::vector<float> scale(n), shift(n);
    for (int64_t c = 0; c < n; ++c) {
        const double mean = sum[c] / (double) n_t;
        const double var = std::max(sum2[c] / (double) n_t - mean * mean, 0.0);
        const double s = weight[c0 + c] / std::sqrt(var + eps);
        scale[c] = (float) s;
        shift[c] = (float) (bias[c0 + c] - mean * s);
    }
    for (int64_t t = 0; t < n_t; ++t) {
        scale_shift((float *) ((char *) dst->data + t * dst->nb[1]) + c0,
                    (const float *) ((const char *) x->data + t * x->nb[1]) + c0, scale.data(), shift.data(), n);
    }
}

}  // namespace

ggml_tensor * ov_layer_norm(ggml_context * ctx, ggml_tensor * x, ggml_tensor * weight, ggml_tensor * bias, float eps,
                            ggml_tensor * residual, ggml_tensor * x_bias) {
    GGML_ASSERT(x->type == GGML_TYPE_F32 && x->nb[0] == sizeof(float) && ggml_n_dims(x) <= 2);
    GGML_ASSERT(weight->type == GGML_TYPE_F32 && ggml_nelements(weight) == x->ne[0]);
    GGML_ASSERT(bias->type == GGML_TYPE_F32 && ggml_nelements(bias) == x->ne[0]);
    GGML_ASSERT(!residual || (residual->type == GGML_TYPE_F32 && residual->nb[0] == sizeof(float) &&
                              residual->ne[0] == x->ne[0] && residual->ne[1] == x->ne[1]));
    GGML_ASSERT(!x_bias || (x_bias->type == GGML_TYPE_F32 && ggml_nelements(x_bias) == x->ne[0]));
    // Absent optional inputs stay null sources, so the compute function tells them apart.
    ggml_tensor * args[] = {x, weight, bias, residual, x_bias};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, x->ne[0], x->ne[1], 1, 1, args, 5, layer_norm_compute,
                          GGML_N_TASKS_MAX, pack_eps(eps));
}

ggml_tensor * ov_channel_norm(ggml_context * ctx, ggml_tensor * x, ggml_tensor * weight, ggml_tensor * bias,
                              float eps) {
    GGML_ASSERT(x->type == GGML_TYPE_F32 && x->nb[0] == sizeof(float) && ggml_n_dims(x) <= 2);
    GGML_ASSERT(weight->type == GGML_TYPE_F32 && ggml_nelements(weight) == x->ne[0]);
    GGML_ASSERT(bias->type == GGML_TYPE_F32 && ggml_nelements(bias) == x->ne[0]);
    ggml_tensor * args[] = {x, weight, bias};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, x->ne[0], x->ne[1], 1, 1, args, 3, channel_norm_compute,
                          GGML_N_TASKS_MAX, pack_eps(eps));
}
