#include "direct_conv.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "custom_op.h"
#include "isa.h"

namespace {

struct ConvArgs {
    const float * x;       // [IC, T_in], row stride x_stride floats; with groups, the first channel of the
                           // group being computed
    int64_t x_stride;
    int64_t t_in;
    const float * w;       // [OC, K*IC]
    const float * bias;    // [OC] or null
    const float * res;     // [OC, T_out] or null, row stride OC
    float * out;           // [OC, T_out]
    const float * zeros;   // ic zeros, the input outside [0, T_in)
    int64_t ic;            // input channels per group (all of them without groups)
    int64_t oc, kernel, stride, padding, dilation;
};

// Outputs t0 .. t0+RT-1, channels oc0 .. oc0 + NV*L - 1, over the reduction rows [q0, q1) of
// the K*IC (row q = k*IC + ic): RT*NV accumulators in registers, starting from the bias on the
// first rows and from the partial sums in `out` after that; the residual joins on the last rows.
template <int L, int RT, int NV>
__attribute__((always_inline)) inline void conv_tile(const ConvArgs & a, int64_t t0, int64_t oc0, int64_t q0,
                                                     int64_t q1) {
    typedef typename OvVec<L>::f vec;
    vec acc[RT][NV];
    for (int r = 0; r < RT; ++r) {
        for (int j = 0; j < NV; ++j) {
            if (q0 > 0) {
                std::memcpy(&acc[r][j], a.out + (t0 + r) * a.oc + oc0 + j * L, sizeof(vec));
            } else if (a.bias) {
                std::memcpy(&acc[r][j], a.bias + oc0 + j * L, sizeof(vec));
            } else {
                acc[r][j] = vec{};
            }
        }
    }
    for (int64_t k = q0 / a.ic; k * a.ic < q1; ++k) {
        const float * rows[RT];
        for (int r = 0; r < RT; ++r) {
            const int64_t ts = (t0 + r) * a.stride + k * a.dilation - a.padding;
            rows[r] = ts >= 0 && ts < a.t_in ? a.x + ts * a.x_stride : a.zeros;
        }
        const float * wk = a.w + k * a.ic * a.oc + oc0;
        const int64_t i0 = q0 > k * a.ic ? q0 - k * a.ic : 0;
        const int64_t i1 = q1 < (k + 1) * a.ic ? q1 - k * a.ic : a.ic;
        for (int64_t i = i0; i < i1; ++i) {
            vec wv[NV];
            for (int j = 0; j < NV; ++j) std::memcpy(&wv[j], wk + i * a.oc + j * L, sizeof(vec));
            for (int r = 0; r < RT; ++r) {
                const float xv = rows[r][i];
                for (int j = 0; j < NV; ++j) acc[r][j] += wv[j] * xv;
            }
        }
    }
    const bool last = q1 == a.kernel * a.ic;
    for (int r = 0; r < RT; ++r) {
        float * o = a.out + (t0 + r) * a.oc + oc0;
        const float * res = a.res && last ? a.res + (t0 + r) * a.oc + oc0 : nullptr;
        for (int j = 0; j < NV; ++j) {
            if (res) {
                vec rv;
                std::memcpy(&rv, res + j * L, sizeof(vec));
                acc[r][j] += rv;
            }
            std::memcpy(o + j * L, &acc[r][j], sizeof(vec));
        }
    }
}

// The reduction is split into chunks whose weights (of one channel block) stay near the core while
// every tile of steps reuses them; each chunk after the first rereads and rewrites the partial
// sums. With few steps those stay in cache and small chunks pay off (the conv at 25 frames/s and
// the first upsampling block: +20-40%); with many steps larger chunks avoid the memory traffic.
constexpr int64_t kFewSteps = 4096;
constexpr int64_t kChunkBytesFewSteps = 64 * 1024;
constexpr int64_t kChunkBytesManySteps = 256 * 1024;

// Steps [t_begin, t_end) for the channel block at oc0 of NV vectors: full tiles of RT steps, then
// one step at a time, per chunk of the reduction. RT*NV accumulators, NV weight vectors and one
// broadcast fill at most the REGS vector registers (at most 24 accumulators).
template <int L, int REGS, int NV>
__attribute__((always_inline)) inline void conv_steps(const ConvArgs & a, int64_t t_begin, int64_t t_end,
                                                      int64_t oc0) {
    constexpr int RT = (REGS - 1 - NV) / NV < 24 / NV ? (REGS - 1 - NV) / NV : 24 / NV;
    const int64_t n_rows = a.kernel * a.ic;
    const int64_t chunk_bytes = t_end - t_begin <= kFewSteps ? kChunkBytesFewSteps : kChunkBytesManySteps;
    const int64_t chunk = chunk_bytes / (NV * L * (int64_t) sizeof(float));
    for (int64_t q0 = 0; q0 < n_rows; q0 += chunk) {
        const int64_t q1 = q0 + chunk < n_rows ? q0 + chunk : n_rows;
        int64_t t = t_begin;
        for (; t + RT <= t_end; t += RT) conv_tile<L, RT, NV>(a, t, oc0, q0, q1);
        for (; t < t_end; ++t) conv_tile<L, 1, NV>(a, t, oc0, q0, q1);
    }
}

// Channels [oc_begin, oc_end) in blocks of NV_MAX (4 or 2), then 2 and 1 vectors, then the
// channels left (a multiple of OV_DIRECT_CONV_LANES, e.g. the LM's 8 x 1025 audio heads) in
// narrower vectors.
template <int L, int REGS, int NV_MAX>
__attribute__((always_inline)) inline void conv_channels(const ConvArgs & a, int64_t t_begin, int64_t t_end,
                                                         int64_t oc_begin, int64_t oc_end) {
    int64_t oc0 = oc_begin;
    for (; NV_MAX == 4 && oc0 + 4 * L <= oc_end; oc0 += 4 * L) conv_steps<L, REGS, 4>(a, t_begin, t_end, oc0);
    for (; oc0 + 2 * L <= oc_end; oc0 += 2 * L) conv_steps<L, REGS, 2>(a, t_begin, t_end, oc0);
    for (; oc0 + L <= oc_end; oc0 += L) conv_steps<L, REGS, 1>(a, t_begin, t_end, oc0);
    if constexpr (L > 8) {
        for (; oc0 + 8 <= oc_end; oc0 += 8) conv_steps<8, REGS, 1>(a, t_begin, t_end, oc0);
    }
    constexpr int L_MIN = OV_DIRECT_CONV_LANES;
    if constexpr (L > L_MIN) {
        for (; oc0 < oc_end; oc0 += L_MIN) conv_steps<L_MIN, REGS, 1>(a, t_begin, t_end, oc0);
    }
}

// Each group's output channels read only its own input channels, so a group is a conv of its own
// (a block of the weight's columns over x shifted to the group's first channel) and no vector
// straddles two groups.
template <int L, int REGS, int NV_MAX>
__attribute__((always_inline)) inline void conv_range(const ConvArgs & a, int64_t t_begin, int64_t t_end,
                                                      int64_t groups) {
    const int64_t oc_group = a.oc / groups;
    for (int64_t g = 0; g < groups; ++g) {
        ConvArgs ag = a;
        ag.x = a.x + g * a.ic;
        conv_channels<L, REGS, NV_MAX>(ag, t_begin, t_end, g * oc_group, (g + 1) * oc_group);
    }
}

// One build per instruction set, with its vector width and register count (32 zmm, 16 ymm, 16
// xmm; with 16, blocks of 4 vectors would leave tiles of 2 steps), picked by ov_isa().
using ConvRangeFn = void (*)(const ConvArgs &, int64_t, int64_t, int64_t);

#if OV_X86
__attribute__((target("arch=x86-64-v4"))) void conv_range_avx512(const ConvArgs & a, int64_t t0, int64_t t1,
                                                                  int64_t groups) {
    conv_range<16, 32, 4>(a, t0, t1, groups);
}

__attribute__((target("arch=x86-64-v3"))) void conv_range_avx2(const ConvArgs & a, int64_t t0, int64_t t1,
                                                                int64_t groups) {
    conv_range<8, 16, 2>(a, t0, t1, groups);
}
#endif

void conv_range_base(const ConvArgs & a, int64_t t0, int64_t t1, int64_t groups) {
    conv_range<4, 16, 2>(a, t0, t1, groups);
}

ConvRangeFn pick_conv_range() {
#if OV_X86
    switch (ov_isa()) {
        case OvIsa::avx512: return conv_range_avx512;
        case OvIsa::avx2: return conv_range_avx2;
        case OvIsa::base: break;
    }
#endif
    return conv_range_base;
}

// dst->src = {x, weight, bias or absent, residual or absent}; userdata: (K, stride, padding,
// dilation); the groups are IC / (the weight's rows / K). Thread ith of nth takes a contiguous
// range of output steps.
void conv_compute(ggml_tensor * dst, int ith, int nth, void * userdata) {
    const ggml_tensor * x = dst->src[0];
    const ggml_tensor * w = dst->src[1];
    ConvArgs a;
    a.x = (const float *) x->data;
    a.x_stride = x->nb[1] / sizeof(float);
    a.t_in = x->ne[1];
    a.w = (const float *) w->data;
    a.bias = dst->src[2] ? (const float *) dst->src[2]->data : nullptr;
    a.res = dst->src[3] ? (const float *) dst->src[3]->data : nullptr;
    a.out = (float *) dst->data;
    a.oc = dst->ne[0];
    a.kernel = ov_param(userdata, 0);
    a.ic = w->ne[1] / a.kernel;
    a.stride = ov_param(userdata, 1);
    a.padding = ov_param(userdata, 2);
    a.dilation = ov_param(userdata, 3);
    thread_local std::vector<float> zeros;
    if ((int64_t) zeros.size() < a.ic) zeros.assign(a.ic, 0.0f);
    a.zeros = zeros.data();

    int64_t t0, t1;
    ov_thread_range(dst->ne[1], ith, nth, &t0, &t1);
    if (t0 < t1) pick_conv_range()(a, t0, t1, x->ne[0] / a.ic);
}

}  // namespace

ggml_tensor * ov_conv_1d_direct(ggml_context * ctx, ggml_tensor * x, ggml_tensor * weight, ggml_tensor * bias,
                                ggml_tensor * residual, int kernel, int stride, int padding, int dilation,
                                int groups) {
    const int64_t ic = x->ne[0], oc = weight->ne[0];
    GGML_ASSERT(x->type == GGML_TYPE_F32 && x->nb[0] == sizeof(float) && ggml_n_dims(x) <= 2);
    GGML_ASSERT(groups >= 1 && ic % groups == 0 && oc % groups == 0);
    GGML_ASSERT(weight->type == GGML_TYPE_F32 && ggml_is_contiguous(weight) && weight->ne[1] == kernel * (ic / groups));
    GGML_ASSERT((oc / groups) % OV_DIRECT_CONV_LANES == 0);
    GGML_ASSERT(!bias || (bias->type == GGML_TYPE_F32 && ggml_nelements(bias) == oc));
    const int64_t t_out = (x->ne[1] + 2 * padding - (int64_t) dilation * (kernel - 1) - 1) / stride + 1;
    GGML_ASSERT(t_out >= 1);
    GGML_ASSERT(!residual || (residual->type == GGML_TYPE_F32 && ggml_is_contiguous(residual) &&
                              residual->ne[0] == oc && residual->ne[1] == t_out));
    // Absent bias or residual stay null source slots, which graph building skips.
    ggml_tensor * args[] = {x, weight, bias, residual};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, oc, t_out, 1, 1, args, 4, conv_compute, GGML_N_TASKS_MAX,
                          ov_pack_params(kernel, stride, padding, dilation));
}
