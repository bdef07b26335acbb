#include "rvq_encode.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "custom_op.h"

namespace {

// y[j] += a * row[j] for j < n: the matrix-vector products below run along contiguous rows of
// transposed weights, so the lanes hold outputs and no horizontal sum is needed.
OV_SIMD_CLONES
void axpy(float * y, float a, const float * row, int64_t n) {
    for (int64_t j = 0; j < n; ++j) y[j] += a * row[j];
}

OV_SIMD_CLONES
void sub_rows(float * r, const float * q, const float * bias, int64_t n) {
    for (int64_t j = 0; j < n; ++j) r[j] -= q[j] + bias[j];
}

// out[j * rows + i] = element i * cols + j of `t` (F32 or F16) from element `offset` on, as F32.
void transpose(float * out, const ggml_tensor * t, int64_t offset, int64_t rows, int64_t cols,
               std::vector<float> & tmp) {
    const float * in = (const float *) t->data + offset;
    if (t->type == GGML_TYPE_F16) {
        tmp.resize(rows * cols);
        ggml_fp16_to_fp32_row((const ggml_fp16_t *) t->data + offset, tmp.data(), rows * cols);
        in = tmp.data();
    }
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) out[j * rows + i] = in[i * cols + j];
}

// dst: [T, n_q] I32; src: x, w_in, b_in, embed, w_out, b_out; userdata: n_q. Thread ith of nth
// takes a range of frames and runs all codebooks over it, one codebook at a time so that its
// weights stay in cache; each thread transposes the weights it needs (a few MB) for itself.
void rvq_encode_compute(ggml_tensor * dst, int ith, int nth, void * userdata) {
    const ggml_tensor * x = dst->src[0];
    const ggml_tensor * w_in = dst->src[1];
    const float * b_in = (const float *) dst->src[2]->data;
    const float * embed = (const float *) dst->src[3]->data;
    const ggml_tensor * w_out = dst->src[4];
    const float * b_out = (const float *) dst->src[5]->data;
    const int64_t n_q = ov_param(userdata, 0);
    const int64_t hidden = x->ne[0], n_t = x->ne[1];
    const int64_t dim = ggml_nelements(dst->src[2]) / n_q;
    const int64_t size = ggml_nelements(dst->src[3]) / (dim * n_q);
    int64_t t0, t1;
    ov_thread_range(n_t, ith, nth, &t0, &t1);
    if (t0 >= t1) return;

    std::vector<float> residual((t1 - t0) * hidden);
    for (int64_t t = t0; t < t1; ++t) {
        std::memcpy(&residual[(t - t0) * hidden], (const char *) x->data + t * x->nb[1], hidden * sizeof(float));
    }
    std::vector<float> w_in_t(hidden * dim), embed_t(dim * size), w_out_t(dim * hidden), e_sq(size);
    std::vector<float> h(dim), dots(size), q(hidden), tmp;
    for (int64_t iq = 0; iq < n_q; ++iq) {
        const float * e = embed + iq * size * dim;
        transpose(w_in_t.data(), w_in, iq * dim * hidden, dim, hidden, tmp);    // [hidden][dim]
        transpose(embed_t.data(), dst->src[3], iq * size * dim, size, dim, tmp);  // [dim][size]
        transpose(w_out_t.data(), w_out, iq * hidden * dim, hidden, dim, tmp);  // [dim][hidden]
        for (int64_t j = 0; j < size; ++j) {
            float s = 0.0f;
            for (int64_t k = 0; k < dim; ++k) s += e[j * dim + k] * e[j * dim + k];
            e_sq[j] = s;
        }
        for (int64_t t = t0; t < t1; ++t) {
            float * r = &residual[(t - t0) * hidden];
            // project_in: h = W_in r + b_in
            std::fill(h.begin(), h.end(), 0.0f);
            for (int64_t i = 0; i < hidden; ++i) axpy(h.data(), r[i], &w_in_t[i * dim], dim);
            float h_sq = 0.0f;
            for (int64_t k = 0; k < dim; ++k) {
                h[k] += b_in[iq * dim + k];
                h_sq += h[k] * h[k];
            }
            // nearest entry
            std::fill(dots.begin(), dots.end(), 0.0f);
            for (int64_t k = 0; k < dim; ++k) axpy(dots.data(), h[k], &embed_t[k * size], size);
            int32_t best = 0;
            float best_score = 0.0f;
            for (int64_t j = 0; j < size; ++j) {
                const float score = -((h_sq - 2.0f * dots[j]) + e_sq[j]);
                if (j == 0 || score > best_score) {
                    best = (int32_t) j;
                    best_score = score;
                }
            }
            ((int32_t *) ((char *) dst->data + iq * dst->nb[1]))[t] = best;
            // residual -= project_out(entry) = W_out e + b_out
            std::fill(q.begin(), q.end(), 0.0f);
            for (int64_t k = 0; k < dim; ++k) axpy(q.data(), e[best * dim + k], &w_out_t[k * hidden], hidden);
            sub_rows(r, q.data(), b_out + iq * hidden, hidden);
        }
    }
}

}  // namespace

ggml_tensor * ov_rvq_encode(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w_in, ggml_tensor * b_in,
                            ggml_tensor * embed, ggml_tensor * w_out, ggml_tensor * b_out, int n_q) {
    GGML_ASSERT(x->type == GGML_TYPE_F32 && x->nb[0] == sizeof(float) && ggml_n_dims(x) <= 2 && n_q >= 1);
    const int64_t hidden = x->ne[0];
    for (ggml_tensor * t : {w_in, b_in, embed, w_out, b_out}) GGML_ASSERT(ggml_is_contiguous(t));
    // The projections may be stored F16 (converted as the op transposes them); the rest is F32.
    for (ggml_tensor * t : {w_in, w_out}) GGML_ASSERT(t->type == GGML_TYPE_F32 || t->type == GGML_TYPE_F16);
    for (ggml_tensor * t : {b_in, embed, b_out}) GGML_ASSERT(t->type == GGML_TYPE_F32);
    const int64_t dim = ggml_nelements(b_in) / n_q;
    GGML_ASSERT(dim >= 1 && ggml_nelements(b_in) == dim * n_q && ggml_nelements(b_out) == hidden * n_q);
    GGML_ASSERT(ggml_nelements(w_in) == hidden * dim * n_q && ggml_nelements(w_out) == hidden * dim * n_q);
    GGML_ASSERT(ggml_nelements(embed) % (dim * n_q) == 0);
    ggml_tensor * args[] = {x, w_in, b_in, embed, w_out, b_out};
    return ggml_custom_4d(ctx, GGML_TYPE_I32, x->ne[1], n_q, 1, 1, args, 6, rvq_encode_compute, GGML_N_TASKS_MAX,
                          ov_pack_params(n_q, 0, 0, 0));
}
