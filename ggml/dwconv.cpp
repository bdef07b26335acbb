#include "dwconv.h"

#include <cstdint>
#include <cstring>

#include "custom_op.h"

namespace {

// out[c] = bias[c] + sum over the taps present of w_k[c] * x_k[c], n channels.
OV_SIMD_CLONES
void dw_step(float * out, const float * const * xs, const float * const * ws, int n_taps, const float * bias,
             int64_t n) {
    if (bias) {
        std::memcpy(out, bias, n * sizeof(float));
    } else {
        std::memset(out, 0, n * sizeof(float));
    }
    for (int j = 0; j < n_taps; ++j) {
        const float * x = xs[j];
        const float * w = ws[j];
        for (int64_t c = 0; c < n; ++c) out[c] += w[c] * x[c];
    }
}

// Enough for every kernel we run (Sopro's 5 and 7) with room; the op asserts it.
constexpr int kMaxTaps = 64;

// dst: [C, T_out]; src: x, weight, bias or absent; userdata: (K, pad_left, dilation). Thread ith
// of nth owns a contiguous range of output steps; taps falling outside x are skipped (zeros).
void dw_compute(ggml_tensor * dst, int ith, int nth, void * userdata) {
    const ggml_tensor * x = dst->src[0];
    const ggml_tensor * w = dst->src[1];
    const float * bias = dst->src[2] ? (const float *) dst->src[2]->data : nullptr;
    const int64_t kernel = ov_param(userdata, 0), pad_left = ov_param(userdata, 1), dilation = ov_param(userdata, 2);
    const int64_t n_ch = x->ne[0], t_in = x->ne[1];
    int64_t t0, t1;
    ov_thread_range(dst->ne[1], ith, nth, &t0, &t1);
    const float * xs[kMaxTaps];
    const float * ws[kMaxTaps];
    for (int64_t t = t0; t < t1; ++t) {
        int n_taps = 0;
        for (int64_t k = 0; k < kernel; ++k) {
            const int64_t ts = t + k * dilation - pad_left;
            if (ts < 0 || ts >= t_in) continue;
            xs[n_taps] = (const float *) ((const char *) x->data + ts * x->nb[1]);
            ws[n_taps] = (const float *) ((const char *) w->data + k * w->nb[1]);
            ++n_taps;
        }
        dw_step((float *) ((char *) dst->data + t * dst->nb[1]), xs, ws, n_taps, bias, n_ch);
    }
}

}  // namespace

ggml_tensor * ov_conv_1d_dw(ggml_context * ctx, ggml_tensor * x, ggml_tensor * weight, ggml_tensor * bias,
                            int pad_left, int pad_right, int dilation) {
    const int64_t kernel = weight->ne[1];
    GGML_ASSERT(x->type == GGML_TYPE_F32 && x->nb[0] == sizeof(float) && ggml_n_dims(x) <= 2);
    GGML_ASSERT(weight->type == GGML_TYPE_F32 && ggml_is_contiguous(weight) && weight->ne[0] == x->ne[0]);
    GGML_ASSERT(kernel >= 1 && kernel <= kMaxTaps && dilation >= 1 && pad_left >= 0 && pad_right >= 0);
    GGML_ASSERT(!bias || (bias->type == GGML_TYPE_F32 && ggml_nelements(bias) == x->ne[0]));
    const int64_t t_out = x->ne[1] + pad_left + pad_right - (int64_t) dilation * (kernel - 1);
    GGML_ASSERT(t_out >= 1);
    ggml_tensor * args[] = {x, weight, bias};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, x->ne[0], t_out, 1, 1, args, bias ? 3 : 2, dw_compute,
                          GGML_N_TASKS_MAX, ov_pack_params(kernel, pad_left, dilation, 0));
}
