#include "rvq_nearest.h"

#include <cstdint>
#include <vector>

#include "custom_op.h"

namespace {

// dots[j] = sum_k h[k] * embed_t[k * n + j]: entries run along the vector lanes.
OV_SIMD_CLONES
void dots_all(float * dots, const float * h, const float * embed_t, int64_t dim, int64_t n) {
    for (int64_t j = 0; j < n; ++j) dots[j] = 0.0f;
    for (int64_t k = 0; k < dim; ++k) {
        const float hk = h[k];
        const float * row = embed_t + k * n;
        for (int64_t j = 0; j < n; ++j) dots[j] += hk * row[j];
    }
}

// dst: [T] I32; src: h, embed. Thread ith of nth takes a range of frames; each thread lays the
// codebook out entry-minor for itself (a few hundred KB) and computes the entries' |e|^2.
void rvq_nearest_compute(ggml_tensor * dst, int ith, int nth, void * /*userdata*/) {
    const ggml_tensor * h = dst->src[0];
    const ggml_tensor * embed = dst->src[1];
    const int64_t dim = embed->ne[0], n = embed->ne[1], n_t = h->ne[1];
    int64_t t0, t1;
    ov_thread_range(n_t, ith, nth, &t0, &t1);
    if (t0 >= t1) return;

    const float * e = (const float *) embed->data;
    std::vector<float> embed_t(dim * n), e_sq(n), dots(n);
    for (int64_t j = 0; j < n; ++j) {
        float s = 0.0f;
        for (int64_t k = 0; k < dim; ++k) {
            embed_t[k * n + j] = e[j * dim + k];
            s += e[j * dim + k] * e[j * dim + k];
        }
        e_sq[j] = s;
    }
    for (int64_t t = t0; t < t1; ++t) {
        const float * ht = (const float *) ((const char *) h->data + t * h->nb[1]);
        float h_sq = 0.0f;
        for (int64_t k = 0; k < dim; ++k) h_sq += ht[k] * ht[k];
        dots_all(dots.data(), ht, embed_t.data(), dim, n);
        int32_t best = 0;
        float best_score = 0.0f;
        for (int64_t j = 0; j < n; ++j) {
            const float score = -((h_sq - 2.0f * dots[j]) + e_sq[j]);
            if (j == 0 || score > best_score) {
                best = (int32_t) j;
                best_score = score;
            }
        }
        ((int32_t *) dst->data)[t] = best;
    }
}

}  // namespace

ggml_tensor * ov_rvq_nearest(ggml_context * ctx, ggml_tensor * h, ggml_tensor * embed) {
    GGML_ASSERT(h->type == GGML_TYPE_F32 && h->nb[0] == sizeof(float) && ggml_n_dims(h) <= 2);
    GGML_ASSERT(embed->type == GGML_TYPE_F32 && ggml_is_contiguous(embed) && embed->ne[0] == h->ne[0]);
    ggml_tensor * args[] = {h, embed};
    return ggml_custom_4d(ctx, GGML_TYPE_I32, h->ne[1], 1, 1, 1, args, 2, rvq_nearest_compute, GGML_N_TASKS_MAX,
                          nullptr);
}
