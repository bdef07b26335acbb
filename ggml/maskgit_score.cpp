#include "maskgit_score.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "custom_op.h"

namespace {

// Above it, exp(b_v - b_best) saturates (the stock form's clamp).
constexpr float kMaxShift = 80.0f;

// dst->src = {logits, cond_rows, uncond_rows or absent}; params: n_vocab, mask_id, guidance bits.
void maskgit_score_compute(ggml_tensor * dst, int ith, int nth, void * params) {
    const ggml_tensor * logits = dst->src[0];
    const int32_t * cond = (const int32_t *) dst->src[1]->data;
    const int32_t * uncond = dst->src[2] ? (const int32_t *) dst->src[2]->data : nullptr;
    const int64_t n_vocab = ov_param(params, 0), mask_id = ov_param(params, 1);
    const uint32_t bits = (uint32_t) ov_param(params, 2) | (uint32_t) ov_param(params, 3) << 16;
    float g;
    std::memcpy(&g, &bits, sizeof g);
    const int64_t n_codebook = logits->ne[0] / n_vocab;
    const int64_t n_cells = dst->ne[1];
    float * out = (float *) dst->data;

    int64_t c0, c1;
    ov_thread_range(n_cells, ith, nth, &c0, &c1);
    for (int64_t cell = c0; cell < c1; ++cell) {
        const int64_t r = cell / n_codebook, k = cell % n_codebook;
        const float * c = (const float *) ((const char *) logits->data + cond[r] * logits->nb[1]) + k * n_vocab;
        const float * u =
            uncond ? (const float *) ((const char *) logits->data + uncond[r] * logits->nb[1]) + k * n_vocab : nullptr;
        const auto b = [&](int64_t v) { return u ? (1.0f + g) * c[v] - g * u[v] : c[v]; };
        float best = -INFINITY;
        int64_t arg = mask_id == 0 ? 1 : 0;
        for (int64_t v = 0; v < n_vocab; ++v) {
            const float x = b(v);
            if (v != mask_id && x > best) {
                best = x;
                arg = v;
            }
        }
        float sum = 0.0f;
        for (int64_t v = 0; v < n_vocab; ++v) sum += std::exp(std::fmin(b(v) - best, kMaxShift));
        out[2 * cell] = -std::log(sum);
        out[2 * cell + 1] = (float) arg;
    }
}

}  // namespace

ggml_tensor * ov_maskgit_score(ggml_context * ctx, ggml_tensor * logits, ggml_tensor * cond_rows,
                               ggml_tensor * uncond_rows, int n_vocab, int mask_id, float guidance) {
    GGML_ASSERT(logits->type == GGML_TYPE_F32 && logits->nb[0] == sizeof(float) && logits->ne[0] % n_vocab == 0);
    GGML_ASSERT(cond_rows->type == GGML_TYPE_I32 && (guidance == 0.0f) == (uncond_rows == nullptr));
    uint32_t bits;
    std::memcpy(&bits, &guidance, sizeof bits);
    ggml_tensor * args[] = {logits, cond_rows, uncond_rows};
    const int64_t n_cells = cond_rows->ne[0] * (logits->ne[0] / n_vocab);
    return ggml_custom_4d(ctx, GGML_TYPE_F32, 2, n_cells, 1, 1, args, uncond_rows ? 3 : 2, maskgit_score_compute,
                          GGML_N_TASKS_MAX, ov_pack_params(n_vocab, mask_id, bits & 0xFFFF, bits >> 16));
}
