#include "snake.h"

#include <cmath>
#include <cstdint>

#include "custom_op.h"

namespace {

// sin^2 has period pi: reduce z to r = z - n*pi in [-pi/2, pi/2] with pi split in three floats of
// 12 significant bits (n*PI_A and n*PI_B stay exact while |n| < 2^12), then sin(r) by its Taylor
// series to r^13, whose truncation error at pi/2 is below 1e-9.
constexpr float kInvPi = 0.318309886183790671f;
constexpr float kPiA = 3.140625f;
constexpr float kPiB = 9.675025939941406e-4f;
constexpr float kPiC = 1.5099580252808664e-7f;
// Adding and subtracting 1.5 * 2^23 rounds a float to the nearest integer without a branch.
constexpr float kRoundMagic = 12582912.0f;
// Past this |alpha * x| the reduction loses bits; such elements are redone with std::sin.
constexpr float kReduceLimit = 8192.0f;

OV_SIMD_CLONES
int snake_row(float * y, const float * x, const float * alpha, const float * inv_alpha, int64_t n) {
    int far = 0;
    for (int64_t i = 0; i < n; ++i) {
        const float z = alpha[i] * x[i];
        const float k = (z * kInvPi + kRoundMagic) - kRoundMagic;
        const float r = ((z - k * kPiA) - k * kPiB) - k * kPiC;
        const float r2 = r * r;
        const float p = 1.0f + r2 * (-1.0f / 6.0f + r2 * (1.0f / 120.0f + r2 * (-1.0f / 5040.0f +
                        r2 * (1.0f / 362880.0f + r2 * (-1.0f / 39916800.0f + r2 * (1.0f / 6227020800.0f))))));
        const float s = r * p;
        y[i] = x[i] + s * s * inv_alpha[i];
        far |= std::fabs(z) > kReduceLimit;
    }
    return far;
}

void snake_row_exact(float * y, const float * x, const float * alpha, const float * inv_alpha, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float s = std::sin(alpha[i] * x[i]);
        y[i] = x[i] + s * s * inv_alpha[i];
    }
}

// ggml custom op: dst->src = {x, alpha, inv_alpha}; thread ith of nth takes a contiguous range of
// rows (time steps), each a vector over the channels.
void snake_compute(ggml_tensor * dst, int ith, int nth, void * /*userdata*/) {
    const ggml_tensor * x = dst->src[0];
    const float * alpha = (const float *) dst->src[1]->data;
    const float * inv_alpha = (const float *) dst->src[2]->data;
    const int64_t n = x->ne[0];  // channels
    const int64_t n_rows = x->ne[1] * x->ne[2] * x->ne[3];
    int64_t r0, r1;
    ov_thread_range(n_rows, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % x->ne[1], i2 = (r / x->ne[1]) % x->ne[2], i3 = r / (x->ne[1] * x->ne[2]);
        const float * src = (const float *) ((const char *) x->data + i1 * x->nb[1] + i2 * x->nb[2] + i3 * x->nb[3]);
        float * out = (float *) ((char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
        if (snake_row(out, src, alpha, inv_alpha, n)) {
            snake_row_exact(out, src, alpha, inv_alpha, n);
        }
    }
}

}  // namespace

ggml_tensor * ov_snake(ggml_context * ctx, ggml_tensor * x, ggml_tensor * alpha, ggml_tensor * inv_alpha,
                       bool fused) {
    GGML_ASSERT(x->type == GGML_TYPE_F32 && alpha->type == GGML_TYPE_F32 && inv_alpha->type == GGML_TYPE_F32);
    GGML_ASSERT(ggml_nelements(alpha) == x->ne[0] && ggml_nelements(inv_alpha) == x->ne[0]);
    if (fused) {
        // Rows are read through their strides, so a cropped view needs no copy first.
        GGML_ASSERT(x->nb[0] == sizeof(float));
        ggml_tensor * args[] = {x, alpha, inv_alpha};
        return ggml_custom_4d(ctx, GGML_TYPE_F32, x->ne[0], x->ne[1], x->ne[2], x->ne[3], args, 3, snake_compute,
                              GGML_N_TASKS_MAX, nullptr);
    }
    // alpha and inv_alpha as [C]: ggml_mul broadcasts them over T.
    ggml_tensor * a = ggml_reshape_1d(ctx, alpha, x->ne[0]);
    ggml_tensor * ia = ggml_reshape_1d(ctx, inv_alpha, x->ne[0]);
    ggml_tensor * s = ggml_sqr(ctx, ggml_sin(ctx, ggml_mul(ctx, x, a)));
    return ggml_add(ctx, x, ggml_mul(ctx, s, ia));
}
