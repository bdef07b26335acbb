#include "activation.h"

#include <cmath>
#include <cstdint>

#include "custom_op.h"

namespace {

constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kGeluCubic = 0.044715f;

float gelu_tanh(float x) {
    return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
}

// Past x = 88 exp overflows to inf, and x * tanh(inf) = x, as in PyTorch.
float mish(float x) { return x * std::tanh(std::log1p(std::exp(x))); }

// ggml custom op: dst->src = {x}; thread ith of nth takes a contiguous range of elements.
template <float (*F)(float)>
void unary_compute(ggml_tensor * dst, int ith, int nth, void * /*userdata*/) {
    const float * x = (const float *) dst->src[0]->data;
    float * y = (float *) dst->data;
    int64_t i0, i1;
    ov_thread_range(ggml_nelements(dst), ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; ++i) y[i] = F(x[i]);
}

ggml_tensor * unary(ggml_context * ctx, ggml_tensor * x, ggml_custom_op_t compute) {
    GGML_ASSERT(x->type == GGML_TYPE_F32 && ggml_is_contiguous(x));
    ggml_tensor * args[] = {x};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, x->ne[0], x->ne[1], x->ne[2], x->ne[3], args, 1, compute,
                          GGML_N_TASKS_MAX, nullptr);
}

}  // namespace

ggml_tensor * ov_gelu_tanh(ggml_context * ctx, ggml_tensor * x) { return unary(ctx, x, unary_compute<gelu_tanh>); }

ggml_tensor * ov_mish(ggml_context * ctx, ggml_tensor * x) { return unary(ctx, x, unary_compute<mish>); }
