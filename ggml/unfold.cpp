#include "unfold.h"

#include <cstdint>
#include <cstring>

#include "custom_op.h"

namespace {

// dst: [K*C, T_out]; src[0]: x [C, T_in]; userdata: (kernel, stride, padding, dilation).
// Each thread fills a range of output columns, each K channel vectors copied (or zeroed).
void unfold_compute(ggml_tensor * dst, int ith, int nth, void * userdata) {
    const int64_t kernel = ov_param(userdata, 0), stride = ov_param(userdata, 1), padding = ov_param(userdata, 2),
                  dilation = ov_param(userdata, 3);
    const ggml_tensor * x = dst->src[0];
    const int64_t t_in = x->ne[1];
    const size_t row_bytes = x->ne[0] * sizeof(float);
    int64_t t0, t1;
    ov_thread_range(dst->ne[1], ith, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; ++t) {
        char * out = (char *) dst->data + t * dst->nb[1];
        for (int64_t k = 0; k < kernel; ++k) {
            const int64_t ts = t * stride + k * dilation - padding;
            if (ts >= 0 && ts < t_in) {
                std::memcpy(out + k * row_bytes, (const char *) x->data + ts * x->nb[1], row_bytes);
            } else {
                std::memset(out + k * row_bytes, 0, row_bytes);
            }
        }
    }
}

// dst: [C, T_out]; src[0]: cols [K*C, T_in]; src[1]: bias or absent; userdata: (C, stride,
// padding). Each thread owns a range of output steps and gathers the (at most ceil(K/stride))
// columns that reach each of them.
void fold_compute(ggml_tensor * dst, int ith, int nth, void * userdata) {
    const int64_t n_ch = ov_param(userdata, 0), stride = ov_param(userdata, 1), padding = ov_param(userdata, 2);
    const ggml_tensor * cols = dst->src[0];
    const float * bias = dst->src[1] ? (const float *) dst->src[1]->data : nullptr;
    const int64_t kernel = cols->ne[0] / n_ch, t_in = cols->ne[1];
    int64_t t0, t1;
    ov_thread_range(dst->ne[1], ith, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; ++t) {
        float * out = (float *) ((char *) dst->data + t * dst->nb[1]);
        if (bias) {
            std::memcpy(out, bias, n_ch * sizeof(float));
        } else {
            std::memset(out, 0, n_ch * sizeof(float));
        }
        // Output t sits at position t + padding of the uncropped overlap-add, = t_src*stride + k.
        const int64_t full = t + padding;
        for (int64_t k = full % stride; k < kernel; k += stride) {
            const int64_t ts = (full - k) / stride;
            if (ts < 0) break;
            if (ts >= t_in) continue;
            const float * c = (const float *) ((const char *) cols->data + ts * cols->nb[1]) + k * n_ch;
            for (int64_t i = 0; i < n_ch; ++i) out[i] += c[i];
        }
    }
}

}  // namespace

ggml_tensor * ov_unfold_1d(ggml_context * ctx, ggml_tensor * x, int kernel, int stride, int padding, int dilation) {
    GGML_ASSERT(x->type == GGML_TYPE_F32 && x->nb[0] == sizeof(float) && ggml_n_dims(x) <= 2);
    GGML_ASSERT(kernel >= 1 && stride >= 1 && dilation >= 1);
    const int64_t t_out = (x->ne[1] + 2 * padding - (int64_t) dilation * (kernel - 1) - 1) / stride + 1;
    GGML_ASSERT(t_out >= 1);
    ggml_tensor * args[] = {x};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, kernel * x->ne[0], t_out, 1, 1, args, 1, unfold_compute,
                          GGML_N_TASKS_MAX, ov_pack_params(kernel, stride, padding, dilation));
}

ggml_tensor * ov_fold_1d(ggml_context * ctx, ggml_tensor * cols, ggml_tensor * bias, int channels, int stride,
                         int padding, int64_t t_out) {
    GGML_ASSERT(cols->type == GGML_TYPE_F32 && ggml_is_contiguous(cols) && ggml_n_dims(cols) <= 2);
    GGML_ASSERT(channels >= 1 && cols->ne[0] % channels == 0 && stride >= 1 && t_out >= 1);
    GGML_ASSERT(!bias || (bias->type == GGML_TYPE_F32 && ggml_nelements(bias) == channels));
    ggml_tensor * args[] = {cols, bias};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, channels, t_out, 1, 1, args, bias ? 2 : 1, fold_compute,
                          GGML_N_TASKS_MAX, ov_pack_params(channels, stride, padding, 0));
}
