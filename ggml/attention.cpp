#include "attention.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "custom_op.h"
#include "isa.h"

// The vector helpers below are always inlined into the per-ISA builds: no call passes a vector, so
// GCC's notes on the AVX vector-passing ABI do not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

// One work item: a panel of P = 3L query rows of one segment and KV head (the rows of its G query
// heads, query-major: row r is query r / G of head r % G) against all keys of the segment.
//  0. Once per thread and (segment, KV head): K and V copied into contiguous panels (pack_kv).
//  1. Q^T panel [hd][P], times the scale (12 KB with AVX2: L1).
//  2. S^T = K Q^T: [keys][P] in tiles of 4 keys x 3 vectors of queries, each key element broadcast
//     over the 3 vectors; the column max on the way. A segment of 1900 keys: 182 KB (L2).
//  3. Per chunk of 256 keys: exp(S^T - max) in place (the chunk stays in L1 for what follows) and
//     its column sums, then O += P V in tiles of 6 queries x 2 vectors of the head dim.
//  4. O / sum to the output rows.
// Softmax is exact and two-pass (segments are a few thousand tokens at most: S^T fits in L2). Each
// output row is computed by one item in a fixed order, so results do not depend on the threads.
//
// Measured with bench/attention.py (AVX2 build, Zen 3, 2 threads, a shared machine; medians of
// alternated rounds in three runs): the cloning packing (1900 + 350 tokens, 16 heads over 8 KV heads,
// head dim 128) at 116-147 GFLOP/s against flash_attn_ext's 83-99 (time 0.66-0.72 of it), 61-78%
// of the 189 GFLOP/s register-only FMA peak; the auto-voice packing (300 + 250) at 73-92 against
// 47-61 (0.64-0.66). Next to bench/lm.py in one run (F32 weights): a cloning step 24.5 s, of which
// 28 layers of this op 7.4 s (flash_attn_ext 10.3 s); an auto-voice step 4.6 s, this op 0.48 s (0.75).
// Reading K and V rows in place (no step 0) ran a 1900-token segment at 40% of the rate (1 thread).
namespace {

constexpr int64_t kKeyChunk = 256;

template <int L>
__attribute__((always_inline)) inline typename OvVec<L>::f splat(float x) {
    typename OvVec<L>::f v = {};
    return v + x;
}

template <int L>
__attribute__((always_inline)) inline typename OvVec<L>::f load(const float * p) {
    typename OvVec<L>::f v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

template <int L>
__attribute__((always_inline)) inline void store(float * p, const typename OvVec<L>::f & v) {
    std::memcpy(p, &v, sizeof v);
}

// exp(x) for x <= 0 (scores minus their row max): x = n ln2 + r with |r| <= ln2/2, Cephes' expf
// polynomial for e^r (relative error ~1e-7), 2^n through the exponent bits; below -87 (e^-87 is
// 1.6e-38, nothing next to the row's e^0 = 1) it is clamped there.
template <int L>
__attribute__((always_inline)) inline typename OvVec<L>::f exp_nonpositive(const typename OvVec<L>::f & x_in) {
    typedef typename OvVec<L>::f vf;
    typedef typename OvVec<L>::i vi;
    const vf lo = splat<L>(-87.0f);
    const vf x = x_in < lo ? lo : x_in;
    // Adding 1.5 * 2^23 rounds x log2(e) to an integer, left in the low mantissa bits.
    const vf magic = splat<L>(12582912.0f);
    const vf t = x * 1.44269504088896341f + magic;
    const vf n = t - magic;
    const vi ni = (vi) t - (vi) magic;
    const vf r = x - n * 0.693359375f + n * 2.12194440e-4f;
    vf p = r * 1.9875691500e-4f + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    return p * (vf) ((ni + 127) << 23);
}

struct Geometry {
    const char * q;
    const char * k;
    const char * v;
    char * o;
    size_t q_nb1, q_nb2, k_nb1, k_nb2, v_nb1, v_nb2, o_nb1, o_nb2;
    int64_t hd, group;  // head dim; query heads per KV head
    float scale;
};

// Per-thread buffers, grown on demand and reused across computes.
struct Scratch {
    std::vector<float> qt, st, kp, vp, o, sum;
};

// S^T rows key .. key+RK-1 (all P columns) = K rows times the Q^T panel; mx = max(mx, them).
// kb: the keys' block of the packed K ([hd][4], row key % 4 first).
template <int L, int RK>
__attribute__((always_inline)) inline void score_tile(const float * kb, int64_t hd, int64_t key, const float * qt,
                                                      float * st, typename OvVec<L>::f mx[3]) {
    typedef typename OvVec<L>::f vf;
    constexpr int P = 3 * L;
    const float * kr = kb + key % 4;
    // Zeroed one by one: `= {}` on the array compiled to a rep stos of a stack copy (with value_tile's,
    // 6% of perf's samples in a 300-token segment).
    vf acc[RK][3];
    for (int r = 0; r < RK; ++r) {
        for (int j = 0; j < 3; ++j) acc[r][j] = vf{};
    }
    for (int64_t d = 0; d < hd; ++d) {
        const vf q0 = load<L>(qt + d * P), q1 = load<L>(qt + d * P + L), q2 = load<L>(qt + d * P + 2 * L);
        for (int r = 0; r < RK; ++r) {
            const float b = kr[d * 4 + r];
            acc[r][0] += q0 * b;
            acc[r][1] += q1 * b;
            acc[r][2] += q2 * b;
        }
    }
    for (int r = 0; r < RK; ++r) {
        for (int j = 0; j < 3; ++j) {
            store<L>(st + (key + r) * P + j * L, acc[r][j]);
            mx[j] = mx[j] > acc[r][j] ? mx[j] : acc[r][j];
        }
    }
}

// O rows q0 .. q0+5, columns [c0, c0 + 2L) += P^T chunk (kc keys) times V's panel of those
// columns (vp: [kc][2L]); o's rows are `stride` apart; `first` starts from zero.
template <int L>
__attribute__((always_inline)) inline void value_tile(const float * pt, const float * vp, int64_t kc, float * o,
                                                      int64_t stride, bool first) {
    typedef typename OvVec<L>::f vf;
    constexpr int P = 3 * L;
    vf acc[6][2];
    for (int r = 0; r < 6; ++r) {
        acc[r][0] = first ? vf{} : load<L>(o + r * stride);
        acc[r][1] = first ? vf{} : load<L>(o + r * stride + L);
    }
    for (int64_t key = 0; key < kc; ++key) {
        const vf v0 = load<L>(vp + key * 2 * L), v1 = load<L>(vp + key * 2 * L + L);
        for (int r = 0; r < 6; ++r) {
            const float b = pt[key * P + r];
            acc[r][0] += v0 * b;
            acc[r][1] += v1 * b;
        }
    }
    for (int r = 0; r < 6; ++r) {
        store<L>(o + r * stride, acc[r][0]);
        store<L>(o + r * stride + L, acc[r][1]);
    }
}

// K and V of KV head `hkv` in the segment at `start` into contiguous buffers, once per thread
// and (segment, KV head): K in blocks of 4 keys [len / 4][hd][4], V in panels of W columns
// [hd_pad / W][len][W] (hd_pad: hd rounded up to W, zeros past hd). Every tile then streams through memory in order (the stacked q|k|v rows are
// 16 KB apart: each key a page of its own, and too short a run for the prefetcher).
template <int W>
__attribute__((always_inline)) inline void pack_kv(const Geometry & g, int64_t start, int64_t len, int64_t hkv,
                                                   float * kp, float * vp) {
    const int64_t hd = g.hd;
    const int64_t hd_pad = (hd + W - 1) / W * W;
    for (int64_t key = 0; key < len; ++key) {
        const float * kr = (const float *) (g.k + (start + key) * g.k_nb2 + hkv * g.k_nb1);
        const float * vr = (const float *) (g.v + (start + key) * g.v_nb2 + hkv * g.v_nb1);
        float * kb = kp + (key / 4) * hd * 4 + key % 4;
        for (int64_t d = 0; d < hd; ++d) kb[d * 4] = kr[d];
        // Each panel's W columns of a key are contiguous in both: one copy per panel.
        for (int64_t c = 0; c < hd_pad; c += W) {
            float * dst = vp + c * len + key * W;
            const int64_t n = hd - c < W ? hd - c : W;
            std::memcpy(dst, vr + c, n * sizeof(float));
            for (int64_t i = n; i < W; ++i) dst[i] = 0.0f;
        }
    }
}

// Rows [row0, row0 + P) of the G * len query rows of KV head `hkv` in the segment at `start`;
// `pack`: K and V of that head and segment are not yet in the scratch.
template <int L>
__attribute__((always_inline)) inline void item(const Geometry & g, int64_t start, int64_t len, int64_t hkv,
                                                int64_t row0, bool pack, Scratch & s) {
    typedef typename OvVec<L>::f vf;
    constexpr int P = 3 * L;
    constexpr int W = 2 * L;  // value tile columns
    const int64_t hd = g.hd;
    const int64_t hd_pad = (hd + W - 1) / W * W;  // O's row stride: whole value tiles
    const int64_t n_rows = g.group * len - row0 < P ? g.group * len - row0 : P;
    float * qt = ov_aligned_floats(s.qt, hd * P);
    float * st = ov_aligned_floats(s.st, len * P);
    float * kp = ov_aligned_floats(s.kp, (len + 3) / 4 * 4 * hd);
    float * vp = ov_aligned_floats(s.vp, len * hd_pad);
    float * o = ov_aligned_floats(s.o, P * hd_pad);
    float * sum = ov_aligned_floats(s.sum, P);
    if (pack) pack_kv<W>(g, start, len, hkv, kp, vp);

    for (int r = 0; r < P; ++r) {
        const int64_t row = row0 + r;
        if (r >= n_rows) {
            for (int64_t d = 0; d < hd; ++d) qt[d * P + r] = 0.0f;
            continue;
        }
        const float * qr = (const float *) (g.q + (start + row / g.group) * g.q_nb2 + (hkv * g.group + row % g.group) * g.q_nb1);
        for (int64_t d = 0; d < hd; ++d) qt[d * P + r] = qr[d] * g.scale;
    }

    vf mx[3] = {splat<L>(-INFINITY), splat<L>(-INFINITY), splat<L>(-INFINITY)};
    int64_t key = 0;
    for (; key + 4 <= len; key += 4) score_tile<L, 4>(kp + key * hd, hd, key, qt, st, mx);
    for (; key < len; ++key) score_tile<L, 1>(kp + key / 4 * 4 * hd, hd, key, qt, st, mx);

    vf total[3] = {};
    for (int64_t c0 = 0; c0 < len; c0 += kKeyChunk) {
        const int64_t kc = len - c0 < kKeyChunk ? len - c0 : kKeyChunk;
        for (int64_t kk = c0; kk < c0 + kc; ++kk) {
            for (int j = 0; j < 3; ++j) {
                const vf e = exp_nonpositive<L>(load<L>(st + kk * P + j * L) - mx[j]);
                store<L>(st + kk * P + j * L, e);
                total[j] += e;
            }
        }
        for (int64_t r = 0; r < P; r += 6) {
            for (int64_t c = 0; c < hd_pad; c += W) {
                value_tile<L>(st + c0 * P + r, vp + c * len + c0 * W, kc, o + r * hd_pad + c, hd_pad, c0 == 0);
            }
        }
    }

    for (int j = 0; j < 3; ++j) store<L>(sum + j * L, total[j]);
    for (int64_t r = 0; r < n_rows; ++r) {
        const int64_t row = row0 + r;
        float * out = (float *) (g.o + (start + row / g.group) * g.o_nb2 + (hkv * g.group + row % g.group) * g.o_nb1);
        const float inv = 1.0f / sum[r];
        for (int64_t d = 0; d < hd; ++d) out[d] = o[r * hd_pad + d] * inv;
    }
}

using ItemFn = void (*)(const Geometry &, int64_t, int64_t, int64_t, int64_t, bool, Scratch &);

void item_base(const Geometry & g, int64_t start, int64_t len, int64_t hkv, int64_t row0, bool pack, Scratch & s) {
    item<4>(g, start, len, hkv, row0, pack, s);
}

#if OV_X86
__attribute__((target("arch=x86-64-v3"))) void item_avx2(const Geometry & g, int64_t start, int64_t len, int64_t hkv,
                                                         int64_t row0, bool pack, Scratch & s) {
    item<8>(g, start, len, hkv, row0, pack, s);
}

// Not run on the development machine (Zen 3, no AVX-512): the same template, 16-wide vectors.
__attribute__((target("arch=x86-64-v4"))) void item_avx512(const Geometry & g, int64_t start, int64_t len,
                                                           int64_t hkv, int64_t row0, bool pack, Scratch & s) {
    item<16>(g, start, len, hkv, row0, pack, s);
}
#endif

ItemFn pick(OvIsa isa, int64_t * panel_rows) {
#if OV_X86
    if (isa == OvIsa::avx512) {
        *panel_rows = 48;
        return item_avx512;
    }
    if (isa == OvIsa::avx2) {
        *panel_rows = 24;
        return item_avx2;
    }
#endif
    *panel_rows = 12;
    return item_base;
}

// dst->src = {q, k, v}. Items (segment, KV head, panel) go in order to whichever thread asks next
// (one atomic counter), so a thread slowed by other work on its core takes fewer of them instead of
// holding the others at the graph's barrier. Each item writes its own output rows: results do not
// depend on which thread computes it. The last thread past its last claim resets the counters.
void attention_compute(ggml_tensor * dst, int, int nth, void * userdata) {
    const OvAttentionParams & p = *(const OvAttentionParams *) userdata;
    const ggml_tensor * q = dst->src[0];
    const ggml_tensor * k = dst->src[1];
    const ggml_tensor * v = dst->src[2];
    const Geometry g = {(const char *) q->data, (const char *) k->data, (const char *) v->data, (char *) dst->data,
                        q->nb[1], q->nb[2], k->nb[1], k->nb[2], v->nb[1], v->nb[2], dst->nb[1], dst->nb[2],
                        q->ne[0], q->ne[1] / k->ne[1], p.scale};
    const int64_t n_head_kv = k->ne[1];
    int64_t panel_rows = 0;
    const ItemFn fn = pick(ov_isa(), &panel_rows);
    const auto panels = [&](int64_t len) { return (g.group * len + panel_rows - 1) / panel_rows; };

    thread_local Scratch scratch;
    int64_t packed_start = -1, packed_hkv = -1;  // what this compute has packed into the scratch
    // Walks the items in order alongside the claims, which only grow.
    size_t seg = 0;
    int64_t start = 0, first = 0;  // segment seg's first token and first item
    for (int64_t item = p.next_item.fetch_add(1, std::memory_order_relaxed);;
         item = p.next_item.fetch_add(1, std::memory_order_relaxed)) {
        while (seg < p.segments.size() && item >= first + n_head_kv * panels(p.segments[seg])) {
            first += n_head_kv * panels(p.segments[seg]);
            start += p.segments[seg++];
        }
        if (seg == p.segments.size()) break;
        const int64_t len = p.segments[seg], hkv = (item - first) / panels(len), panel = (item - first) % panels(len);
        fn(g, start, len, hkv, panel * panel_rows, start != packed_start || hkv != packed_hkv, scratch);
        packed_start = start;
        packed_hkv = hkv;
    }
    if (p.threads_done.fetch_add(1, std::memory_order_acq_rel) + 1 == nth) {
        p.next_item.store(0, std::memory_order_relaxed);
        p.threads_done.store(0, std::memory_order_relaxed);
    }
}

}  // namespace

ggml_tensor * ov_attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v,
                           const OvAttentionParams * params) {
    GGML_ASSERT(q->type == GGML_TYPE_F32 && k->type == GGML_TYPE_F32 && v->type == GGML_TYPE_F32);
    GGML_ASSERT(q->nb[0] == sizeof(float) && k->nb[0] == sizeof(float) && v->nb[0] == sizeof(float));
    GGML_ASSERT(q->ne[0] >= 1 && k->ne[0] == q->ne[0] && v->ne[0] == q->ne[0]);
    GGML_ASSERT(k->ne[1] == v->ne[1] && q->ne[1] % k->ne[1] == 0);
    GGML_ASSERT(k->ne[2] == q->ne[2] && v->ne[2] == q->ne[2] && q->ne[3] == 1 && k->ne[3] == 1 && v->ne[3] == 1);
    int64_t n_tokens = 0;
    for (int64_t len : params->segments) {
        GGML_ASSERT(len >= 1);
        n_tokens += len;
    }
    GGML_ASSERT(n_tokens == q->ne[2]);
    ggml_tensor * args[] = {q, k, v};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, q->ne[0], q->ne[1], q->ne[2], 1, args, 3, attention_compute,
                          GGML_N_TASKS_MAX, (void *) params);
}
