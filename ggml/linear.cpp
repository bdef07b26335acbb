#include "linear.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "custom_op.h"
#include "isa.h"

#if OV_X86
#include <immintrin.h>
#define OV_TARGET_AVX2 __attribute__((target("arch=x86-64-v3")))
#define OV_TARGET_BF16 __attribute__((target("arch=x86-64-v4,avx512bf16")))
#endif

namespace {

// Bytes of one packed weight panel: 384 inputs x 16 outputs (AVX2), 192 x 32 (AVX-512). 3/4 of
// Zen 3's 32 KB L1, next to one tile's 9 KB of x. Larger chunks mean fewer passes over y and fewer
// tile starts per weight: on Zen 3, 1 thread, best of 12 at the LM's shapes, 384 inputs reached
// 86-91% of the FMA peak against 83-90% at 256, 82-85% at 192 and 80-85% at 128.
constexpr int64_t kPanelBytes = 24 * 1024;
constexpr int64_t kPanelFloats = 256 * 32;  // room for the largest panel: a K-quant chunk x 32
constexpr int kQ8Block = 32;  // Q8_0: an F16 scale, then 32 int8 values
// K-quants (Q4_K, Q5_K, Q6_K): super-blocks of 256, so their chunks are 256 inputs (panels of 16 KB
// with AVX2, 32 KB with AVX-512).
constexpr int64_t kKBlock = 256;
// Marks a build that unpacks rows through ggml's own to_float (the K-quants) instead of our code.
constexpr ggml_type kDequant = GGML_TYPE_COUNT;
constexpr int kQ8Bytes = 34;

struct Weight {
    const char * data;
    int64_t row_bytes;
    int64_t rows;
    int64_t out_offset;  // first output row of this weight in y
    const ggml_type_traits * traits;
};

struct LinearArgs {
    const float * xp;        // x packed for the tiles by pack_x_compute: [tile][IN][RT]
    const uint32_t * xp16;   // or in bf16 pairs, for the vdpbf16ps build: [tile][(IN + 1) / 2][RT]
    int64_t n_in, n_tok;
    float * y;  // [OUT, N], row stride y_stride floats
    int64_t y_stride;
    std::vector<Weight> weights;
};

// Input k of a weight row, as F32.
template <ggml_type T>
inline float element(const char * row, int64_t k) {
    if constexpr (T == GGML_TYPE_F32) {
        return ((const float *) row)[k];
    } else if constexpr (T == GGML_TYPE_BF16) {
        const uint32_t bits = (uint32_t) ((const uint16_t *) row)[k] << 16;
        float f;
        std::memcpy(&f, &bits, sizeof f);
        return f;
    } else if constexpr (T == GGML_TYPE_F16) {
        return ggml_fp16_to_fp32(((const ggml_fp16_t *) row)[k]);
    } else {
        const char * block = row + (k / kQ8Block) * kQ8Bytes;
        ggml_fp16_t d;
        std::memcpy(&d, block, sizeof d);
        return ggml_fp16_to_fp32(d) * (float) (int8_t) block[2 + k % kQ8Block];
    }
}

// panel[k][r] = weight row (r0 + r), input (k0 + k), for k < kc and r < P; rows past the weight's
// end are zeros. Plain code: any CPU.
template <ggml_type T, int P>
struct PackPlain {
    static void pack(const Weight & w, int64_t r0, int64_t k0, int64_t kc, float * panel) {
        for (int r = 0; r < P; ++r) {
            const bool valid = r0 + r < w.rows;
            const char * row = w.data + (r0 + r) * w.row_bytes;
            for (int64_t k = 0; k < kc; ++k) panel[k * P + r] = valid ? element<T>(row, k0 + k) : 0.0f;
        }
    }
};

#if OV_X86
// Inputs k .. k+7 of a weight row as 8 floats.
template <ggml_type T>
OV_TARGET_AVX2 inline __m256 load8(const char * row, int64_t k) {
    if constexpr (T == GGML_TYPE_F32) {
        return _mm256_loadu_ps((const float *) row + k);
    } else if constexpr (T == GGML_TYPE_BF16) {
        const __m128i h = _mm_loadu_si128((const __m128i *) ((const uint16_t *) row + k));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else if constexpr (T == GGML_TYPE_F16) {
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) ((const uint16_t *) row + k)));
    } else {
        const char * block = row + (k / kQ8Block) * kQ8Bytes;
        uint16_t d;
        std::memcpy(&d, block, sizeof d);
        const __m128i q = _mm_loadl_epi64((const __m128i *) (block + 2 + k % kQ8Block));
        const __m256 scale = _mm256_cvtph_ps(_mm_set1_epi16((short) d));
        return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), scale);
    }
}

// v[j] <- column j of the 8x8 block whose rows are v[0..7].
OV_TARGET_AVX2 inline void transpose8(__m256 v[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; ++i) {
        v[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        v[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

// PackPlain's result, 8 rows x 8 inputs at a time through AVX2 transposes (about 4x faster).
template <ggml_type T, int P>
struct PackAvx2 {
    OV_TARGET_AVX2 static void pack(const Weight & w, int64_t r0, int64_t k0, int64_t kc, float * panel) {
        const int64_t kc8 = kc & ~(int64_t) 7;
        for (int g = 0; g < P; g += 8) {
            const char * rows[8];
            bool valid[8];
            for (int i = 0; i < 8; ++i) {
                valid[i] = r0 + g + i < w.rows;
                rows[i] = w.data + (r0 + g + i) * w.row_bytes;
            }
            for (int64_t k = 0; k < kc8; k += 8) {
                __m256 v[8];
                for (int i = 0; i < 8; ++i) v[i] = valid[i] ? load8<T>(rows[i], k0 + k) : _mm256_setzero_ps();
                transpose8(v);
                for (int j = 0; j < 8; ++j) _mm256_storeu_ps(panel + (k + j) * P + g, v[j]);
            }
            for (int64_t k = kc8; k < kc; ++k) {
                for (int i = 0; i < 8; ++i) panel[k * P + g + i] = valid[i] ? element<T>(rows[i], k0 + k) : 0.0f;
            }
        }
    }
};
#endif

// A K-quant panel: its rows through ggml's to_float into [rows][kc] F32, then transposed as F32
// weights are. Zen 3, ggml-base's to_float: Q4_K 0.32 ns per weight, Q6_K 2.2 ns, against about 13
// ns of FMA work per weight on one thread at N = 550, where ggml's own mul_mat runs Q4_K at 87-102
// GFLOP/s and Q6_K at 65-83 on 2 threads (F32 through this op: 128-166).
template <int P, typename PackF32>
struct PackDequant {
    static void pack(const Weight & w, int64_t r0, int64_t k0, int64_t kc, float * panel) {
        thread_local std::vector<float> rows_f32;
        if ((int64_t) rows_f32.size() < P * kc) rows_f32.resize(P * kc);
        const int rows = w.rows - r0 < P ? (int) (w.rows - r0) : P;
        const int64_t begin = k0 / w.traits->blck_size * (int64_t) w.traits->type_size;
        for (int r = 0; r < rows; ++r) {
            w.traits->to_float(w.data + (r0 + r) * w.row_bytes + begin, &rows_f32[r * kc], kc);
        }
        const Weight f32 = {(const char *) rows_f32.data(), kc * (int64_t) sizeof(float), rows, 0, nullptr};
        PackF32::pack(f32, 0, 0, kc, panel);
    }
};

// The unpacking of type T (kDequant: through to_float) with Pack's F32 code, and its chunk.
template <ggml_type T, int P, template <ggml_type, int> class Pack>
using PackOf = std::conditional_t<T == kDequant, PackDequant<P, Pack<GGML_TYPE_F32, P>>, Pack<T, P>>;
template <ggml_type T, int P>
constexpr int64_t chunk_of = T == kDequant ? kKBlock : kPanelBytes / (P * (int64_t) sizeof(float));

// xp[t][k][r] = x row (RT t + r), input k, for tiles [t0, t1): each tile's tokens as one
// contiguous [IN][RT] micro-panel, rows past the last token zero. Read in place, the RT rows of a
// tile are 1024 or more floats apart: at 4 KB strides they all fall in the same L1 sets.
template <int RT>
void pack_tiles(const float * x, int64_t x_stride, int64_t n_in, int64_t n_tok, int64_t t0, int64_t t1, float * xp) {
    for (int64_t t = t0; t < t1; ++t) {
        float * dst = xp + t * n_in * RT;
        for (int r = 0; r < RT; ++r) {
            const int64_t row = t * RT + r;
            for (int64_t k = 0; k < n_in; ++k) dst[k * RT + r] = row < n_tok ? x[row * x_stride + k] : 0.0f;
        }
    }
}

// y rows [0, rows), outputs [0, cols) of a tile's accumulators, added to y when `accumulate`.
template <int L, int NV, int RT>
__attribute__((always_inline)) inline void store_tile(const typename OvVec<L>::f (&acc)[RT][NV], float * c,
                                                      int64_t c_stride, int rows, int cols, bool accumulate) {
    typedef typename OvVec<L>::f vec;
    constexpr int P = NV * L;
    for (int r = 0; r < RT && r < rows; ++r) {
        float * out = c + r * c_stride;
        if (cols == P) {
            for (int j = 0; j < NV; ++j) {
                vec v = acc[r][j];
                if (accumulate) {
                    vec old;
                    std::memcpy(&old, out + j * L, sizeof(vec));
                    v += old;
                }
                std::memcpy(out + j * L, &v, sizeof(vec));
            }
        } else {
            float buf[P];
            for (int j = 0; j < NV; ++j) std::memcpy(buf + j * L, &acc[r][j], sizeof(vec));
            for (int i = 0; i < cols; ++i) out[i] = accumulate ? out[i] + buf[i] : buf[i];
        }
    }
}

// y rows [0, rows) of a tile of RT tokens, outputs [0, cols) of a panel of NV*L (c points at the
// panel's first output of the tile's first token): the sum of panel^T xp over kc inputs, added to
// y when `accumulate` (later chunks), stored otherwise. Per input: NV weight loads, RT broadcasts
// and RT*NV FMAs on registers; the accumulators start from zero, so y is touched once per chunk.
template <int L, int NV, int RT>
__attribute__((always_inline)) inline void tile(const float * panel, const float * xp, int64_t kc, float * c,
                                                int64_t c_stride, int rows, int cols, bool accumulate) {
    typedef typename OvVec<L>::f vec;
    constexpr int P = NV * L;
    vec acc[RT][NV];
    for (int r = 0; r < RT; ++r) {
        for (int j = 0; j < NV; ++j) acc[r][j] = vec{};
    }
    for (int64_t k = 0; k < kc; ++k) {
        vec wv[NV];
        for (int j = 0; j < NV; ++j) std::memcpy(&wv[j], panel + k * P + j * L, sizeof(vec));
        for (int r = 0; r < RT; ++r) {
            const float xv = xp[k * RT + r];
            for (int j = 0; j < NV; ++j) acc[r][j] += wv[j] * xv;
        }
    }
    store_tile<L, NV, RT>(acc, c, c_stride, rows, cols, accumulate);
}

// The bytes of rows [r0, r0 + P) of a weight that hold inputs [k0, k0 + kc), fetched into cache a
// few lines at a time while the panel before them computes, so that packing does not wait on
// memory (each weight byte is read once per call: the weights stream from DRAM).
struct PanelPrefetch {
    const char * row = nullptr;
    int64_t row_bytes = 0, line_bytes = 0, rows_left = 0, offset = 0;

    PanelPrefetch() = default;
    PanelPrefetch(const Weight & w, int64_t n_in, int64_t r0, int rows, int64_t k0, int64_t kc) {
        // Exact for every type: k0 and kc are whole blocks (Q8_0: 32) and rows hold n_in inputs.
        const int64_t begin = k0 * w.row_bytes / n_in;
        row = w.data + r0 * w.row_bytes + begin;
        row_bytes = w.row_bytes;
        line_bytes = (k0 + kc) * w.row_bytes / n_in - begin;
        rows_left = w.rows - r0 < rows ? w.rows - r0 : rows;
    }

    int64_t lines() const { return rows_left * ((line_bytes + 63) / 64); }

    void step(int64_t n) {
        for (; n > 0 && rows_left > 0; --n) {
            __builtin_prefetch(row + offset);
            offset += 64;
            if (offset >= line_bytes) {
                offset = 0;
                row += row_bytes;
                --rows_left;
            }
        }
    }
};

// Where a thread's next unit starts, so that its first chunk is fetched while this one ends.
struct NextPanel {
    const Weight * w = nullptr;  // none when the thread has no unit left
    int64_t r0 = 0;
};

#if OV_X86
// A BF16 panel in pairs of inputs: panel word [k/2][r] = inputs (k0 + k, k0 + k + 1) of row r0 + r,
// the first in the low half as vdpbf16ps pairs them. The row's bf16 pairs are moved as if they were
// F32 values (the transposes only move bits); an odd last input is paired with zero.
template <int P>
struct PackPairs {
    OV_TARGET_AVX2 static void pack(const Weight & w, int64_t r0, int64_t k0, int64_t kc, float * panel) {
        const Weight words = {w.data, w.row_bytes, w.rows, 0, nullptr};
        PackAvx2<GGML_TYPE_F32, P>::pack(words, r0, k0 / 2, kc / 2, panel);
        if (kc % 2 == 0) return;
        auto * last = (uint32_t *) (panel + kc / 2 * P);
        for (int r = 0; r < P; ++r) {
            const auto * row = (const uint16_t *) (w.data + (r0 + r) * w.row_bytes);
            last[r] = r0 + r < w.rows ? row[k0 + kc - 1] : 0;
        }
    }
};

// The vdpbf16ps tiles: RT tokens x 32 outputs over x packed in bf16 pairs, per pair of inputs 2
// weight loads, RT broadcasts (from memory, into the instruction) and 2 RT dot products into F32
// accumulators (14 tokens: 28 of the 32 zmm).
template <int RT>
struct Bf16Tile {
    static constexpr int kRows = RT, kWidth = 32, kInputsPerFloat = 2;
    // A call of its own per tile: linear_panel, built for any target, cannot inline vdpbf16ps code.
    OV_TARGET_BF16 static void run(const LinearArgs & a, const float * panel, int64_t t, int64_t k0, int64_t kc,
                                   float * c, int rows, int cols, bool accumulate) {
        typedef OvVec<16>::f vec;
        const uint32_t * xp = a.xp16 + t * ((a.n_in + 1) / 2) + k0 / 2 * RT;
        vec acc[RT][2];
        for (int r = 0; r < RT; ++r) acc[r][0] = acc[r][1] = vec{};
        for (int64_t k = 0; k < (kc + 1) / 2; ++k) {
            const auto w0 = (__m512bh) _mm512_load_si512(panel + k * 32);
            const auto w1 = (__m512bh) _mm512_load_si512(panel + k * 32 + 16);
            for (int r = 0; r < RT; ++r) {
                const auto xv = (__m512bh) _mm512_set1_epi32((int) xp[k * RT + r]);
                acc[r][0] = (vec) _mm512_dpbf16_ps((__m512) acc[r][0], w0, xv);
                acc[r][1] = (vec) _mm512_dpbf16_ps((__m512) acc[r][1], w1, xv);
            }
        }
        store_tile<16, 2, RT>(acc, c, a.y_stride, rows, cols, accumulate);
    }
};
#endif

// The F32 tiles: tile() over x packed in F32, RT tokens by NV vectors of L outputs.
template <int L, int NV, int RT>
struct F32Tile {
    static constexpr int kRows = RT, kWidth = NV * L, kInputsPerFloat = 1;
    __attribute__((always_inline)) static inline void run(const LinearArgs & a, const float * panel, int64_t t,
                                                          int64_t k0, int64_t kc, float * c, int rows, int cols,
                                                          bool accumulate) {
        tile<L, NV, RT>(panel, a.xp + t * a.n_in + k0 * RT, kc, c, a.y_stride, rows, cols, accumulate);
    }
};

// Outputs [r0, r0 + P) of weight w for tokens [t0, t1) (whole tiles from t0), chunk by chunk of
// the inputs: each chunk of the weights is unpacked once into `panel` while the next chunk (or the
// next unit's first) is prefetched, and every tile of those tokens runs over it. Chunks add to y
// in input order, whichever thread computes the panel: results do not depend on the thread count
// or timing.
template <typename Tile, typename Pack, int64_t chunk>
__attribute__((always_inline)) inline void linear_panel(const LinearArgs & a, const Weight & w, int64_t r0,
                                                        int64_t t0, int64_t t1, const NextPanel & next,
                                                        float * panel) {
    constexpr int P = Tile::kWidth, RT = Tile::kRows;
    const int64_t n_tiles = (t1 - t0 + RT - 1) / RT;
    static_assert(chunk % kQ8Block == 0 && chunk * P <= kPanelFloats * Tile::kInputsPerFloat,
                  "chunks hold whole Q8_0 blocks and fit the panel");
    const int cols = w.rows - r0 < P ? (int) (w.rows - r0) : P;
    float * c = a.y + w.out_offset + r0;
    for (int64_t k0 = 0; k0 < a.n_in; k0 += chunk) {
        const int64_t kc = a.n_in - k0 < chunk ? a.n_in - k0 : chunk;
        Pack::pack(w, r0, k0, kc, panel);
        PanelPrefetch ahead;
        if (k0 + chunk < a.n_in) {
            const int64_t kc_next = a.n_in - k0 - chunk < chunk ? a.n_in - k0 - chunk : chunk;
            ahead = PanelPrefetch(w, a.n_in, r0, P, k0 + chunk, kc_next);
        } else if (next.w) {
            ahead = PanelPrefetch(*next.w, a.n_in, next.r0, P, 0, a.n_in < chunk ? a.n_in : chunk);
        }
        const int64_t per_tile = (ahead.lines() + n_tiles - 1) / n_tiles;
        for (int64_t t = t0; t < t1; t += RT) {
            const int rows = t1 - t < RT ? (int) (t1 - t) : RT;
            ahead.step(per_tile);
            // The next tile's outputs: y rows are OUT floats apart, a cache miss each.
            for (int r = 0; r < RT && t + RT + r < t1; ++r) {
                __builtin_prefetch(c + (t + RT + r) * a.y_stride, 1);
                __builtin_prefetch(c + (t + RT + r) * a.y_stride + P - 1, 1);
            }
            Tile::run(a, panel, t, k0, kc, c + t * a.y_stride, rows, cols, k0 > 0);
        }
    }
}

// One build per instruction set and weight type, and the vdpbf16ps one for BF16. Register budget:
// RT*NV accumulators, NV weight vectors and a broadcast within 16 ymm (AVX2: 6x2) or 32 zmm
// (AVX-512 and vdpbf16ps: 14x2, 32 outputs).
// Each unpacks into `panel`, the thread's scratch of kPanelFloats.
using PanelFn = void (*)(const LinearArgs &, const Weight &, int64_t, int64_t, int64_t, const NextPanel &, float *);

// Tokens per tile and outputs per panel of each build.
constexpr int kTileRows[] = {2, 6, 14};
constexpr int kPanelWidth[] = {16, 16, 32};

template <ggml_type T>
void panel_base(const LinearArgs & a, const Weight & w, int64_t r0, int64_t t0, int64_t t1, const NextPanel & next,
                float * panel) {
    linear_panel<F32Tile<4, 4, 2>, PackOf<T, 16, PackPlain>, chunk_of<T, 16>>(a, w, r0, t0, t1, next, panel);
}

#if OV_X86
template <ggml_type T>
OV_TARGET_AVX2 void panel_avx2(const LinearArgs & a, const Weight & w, int64_t r0, int64_t t0, int64_t t1,
                               const NextPanel & next, float * panel) {
    linear_panel<F32Tile<8, 2, 6>, PackOf<T, 16, PackAvx2>, chunk_of<T, 16>>(a, w, r0, t0, t1, next, panel);
}

// Not run on the development machine (Zen 3, no AVX-512): the same template as the AVX2 build,
// wider vectors; the tests cover it on AVX-512 hardware only.
template <ggml_type T>
__attribute__((target("arch=x86-64-v4"))) void panel_avx512(const LinearArgs & a, const Weight & w, int64_t r0,
                                                            int64_t t0, int64_t t1, const NextPanel & next,
                                                            float * panel) {
    linear_panel<F32Tile<16, 2, 14>, PackOf<T, 32, PackAvx2>, chunk_of<T, 32>>(a, w, r0, t0, t1, next, panel);
}

// BF16 weights on AVX512-BF16: 384 inputs x 32 outputs in pairs (24 KB) per chunk, 14 tokens a tile.
OV_TARGET_BF16 void panel_bf16(const LinearArgs & a, const Weight & w, int64_t r0, int64_t t0, int64_t t1,
                               const NextPanel & next, float * panel) {
    linear_panel<Bf16Tile<14>, PackPairs<32>, 2 * kPanelBytes / (32 * (int64_t) sizeof(float))>(a, w, r0, t0, t1, next, panel);
}
#endif

template <ggml_type T>
PanelFn pick(OvIsa isa) {
#if OV_X86
    if (isa == OvIsa::avx512) return panel_avx512<T>;
    if (isa == OvIsa::avx2) return panel_avx2<T>;
#endif
    (void) isa;
    return panel_base<T>;
}

PanelFn pick_for(ggml_type type, OvIsa isa, bool bf16_dot) {
#if OV_X86
    if (type == GGML_TYPE_BF16 && bf16_dot) return panel_bf16;
#endif
    (void) bf16_dot;
    switch (type) {
        case GGML_TYPE_F32: return pick<GGML_TYPE_F32>(isa);
        case GGML_TYPE_F16: return pick<GGML_TYPE_F16>(isa);
        case GGML_TYPE_BF16: return pick<GGML_TYPE_BF16>(isa);
        case GGML_TYPE_Q8_0: return pick<GGML_TYPE_Q8_0>(isa);
        case GGML_TYPE_Q4_K:
        case GGML_TYPE_Q5_K:
        case GGML_TYPE_Q6_K: return pick<kDequant>(isa);
        default: GGML_ABORT("ov_linear: unsupported weight type");
    }
}

// Tokens run in blocks whose packed x stays within this many bytes, so that the x each panel
// streams once per chunk comes from L3 rather than DRAM; each block unpacks the weights again.
// Zen 3 (32 MB L3, shared with other VMs), BF16 cloning step (2250 tokens, 2 threads, 2 runs
// each): 4 MB 19.6-21.0 s, 12 MB 19.7-22.4 s, unblocked (27 MB of x at the FFN's down) 23.3 s.
// 8 MB keeps the auto-voice step (550 tokens, at most 6.8 MB) in one block: 1 thread, its o and
// down projections ran at 72-89% of the FMA peak against 73-83% with 4 MB (two blocks).
constexpr int64_t kXBlockBytes = 8 << 20;

// The head of the packed-x tensor, before the tiles: written by the pack op, read by the product.
// The F32 tiles follow it, then (where a weight is BF16) room for the bf16 tiles.
struct alignas(64) PackedHeader {
    int64_t isa;                 // the OvIsa the tiles were packed for (the cap may change between graphs)
    int64_t bf16;                // whether BF16 weights run on vdpbf16ps over the bf16 tiles
    std::atomic<int64_t> claim;  // the next unit to hand out
};
constexpr int64_t kHeaderFloats = sizeof(PackedHeader) / sizeof(float);
static_assert(sizeof(PackedHeader) % 64 == 0 && std::atomic<int64_t>::is_always_lock_free);

// Floats of the F32 tiles, and words of the bf16 tiles, for any build's tile (up to 14 tokens).
int64_t f32_tiles_floats(int64_t n_in, int64_t n_tok) { return n_in * (n_tok + kTileRows[(int) OvIsa::avx512] - 1); }
int64_t bf16_tiles_words(int64_t n_in, int64_t n_tok) {
    return (n_in + 1) / 2 * (n_tok + kTileRows[(int) OvIsa::avx512] - 1);
}

#if OV_X86
// v[j] <- column j of the 16x16 block of 32-bit words whose rows are v[0..15].
OV_TARGET_BF16 inline void transpose16(__m512i v[16]) {
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
    }
    // v[4i + j], 128-bit lane l: column 4l + j of rows 4i .. 4i + 3.
    for (int i = 0; i < 16; i += 4) {
        v[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        v[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        v[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        v[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int j = 0; j < 4; ++j) {
        const __m512i u0 = _mm512_shuffle_i32x4(v[j], v[4 + j], 0x44), u1 = _mm512_shuffle_i32x4(v[j], v[4 + j], 0xEE);
        const __m512i w0 = _mm512_shuffle_i32x4(v[8 + j], v[12 + j], 0x44);
        const __m512i w1 = _mm512_shuffle_i32x4(v[8 + j], v[12 + j], 0xEE);
        t[j] = _mm512_shuffle_i32x4(u0, w0, 0x88);
        t[4 + j] = _mm512_shuffle_i32x4(u0, w0, 0xDD);
        t[8 + j] = _mm512_shuffle_i32x4(u1, w1, 0x88);
        t[12 + j] = _mm512_shuffle_i32x4(u1, w1, 0xDD);
    }
    for (int i = 0; i < 16; ++i) v[i] = t[i];
}

// xp[t][k/2][r] = inputs (k, k + 1) of x row (14 t + r) in bf16, one word per pair (the first in
// the low half; an odd last input paired with zero), for tiles [t0, t1), rows past the last token
// zero. Rounded to nearest even by vcvtne2ps2bf16, as ggml's own conversion (so ggml's BF16
// mul_mat sees the same x). 16 pairs of a tile at a time: each token's 32 inputs become one zmm of
// 16 words, transposed so that each pair's 14 words store as one run.
OV_TARGET_BF16 void pack_tiles_bf16(const float * x, int64_t x_stride, int64_t n_in, int64_t n_tok, int64_t t0,
                                    int64_t t1, uint32_t * xp) {
    constexpr int RT = 14;
    const int64_t n_pairs = (n_in + 1) / 2;
    for (int64_t t = t0; t < t1; ++t) {
        uint32_t * dst = xp + t * n_pairs * RT;
        const int64_t rows = n_tok - t * RT < RT ? n_tok - t * RT : RT;
        for (int64_t k = 0; k < n_pairs; k += 16) {
            const int64_t left = n_in - 2 * k;  // inputs from this block's first
            const __mmask16 lo = left >= 16 ? 0xFFFF : (__mmask16) ((1u << left) - 1);
            const __mmask16 hi = left >= 32 ? 0xFFFF : left > 16 ? (__mmask16) ((1u << (left - 16)) - 1) : 0;
            __m512i v[16];
            for (int r = 0; r < 16; ++r) {
                if (r >= rows) {
                    v[r] = _mm512_setzero_si512();
                    continue;
                }
                const float * src = x + (t * RT + r) * x_stride + 2 * k;
                v[r] = (__m512i) _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, src + 16), _mm512_maskz_loadu_ps(lo, src));
            }
            transpose16(v);
            const int64_t pairs = n_pairs - k < 16 ? n_pairs - k : 16;
            for (int j = 0; j < pairs; ++j) _mm512_mask_storeu_epi32(dst + (k + j) * RT, (1 << RT) - 1, v[j]);
        }
    }
}
#endif

// dst = the packed-x tensor, dst->src[0] = x [IN, N]; userdata: whether some weight is BF16, whether
// some weight is not. Threads pack contiguous ranges of tiles, in F32 for the weights that are
// unpacked to F32 and in bf16 pairs for the BF16 ones on vdpbf16ps; thread 0 also resets the unit
// counter, which the graph's barrier publishes to the product.
void pack_x_compute(ggml_tensor * dst, int ith, int nth, void * userdata) {
    const ggml_tensor * x = dst->src[0];
    auto * head = (PackedHeader *) dst->data;
    const OvIsa isa = ov_isa();
    const bool bf16 = ov_param(userdata, 0) && ov_bf16_dot(), f32 = ov_param(userdata, 1) || !bf16;
    if (ith == 0) {
        head->isa = (int64_t) isa;
        head->bf16 = bf16;
        head->claim.store(0, std::memory_order_relaxed);
    }
    const int rt = kTileRows[(int) isa];
    const int64_t n_in = x->ne[0], n_tok = x->ne[1], x_stride = x->nb[1] / sizeof(float);
    int64_t t0, t1;
    ov_thread_range((n_tok + rt - 1) / rt, ith, nth, &t0, &t1);
    const auto * xd = (const float *) x->data;
    float * xp = (float *) dst->data + kHeaderFloats;
#if OV_X86
    if (bf16) pack_tiles_bf16(xd, x_stride, n_in, n_tok, t0, t1, (uint32_t *) (xp + f32_tiles_floats(n_in, n_tok)));
#endif
    if (!f32) return;
    if (rt == 2) pack_tiles<2>(xd, x_stride, n_in, n_tok, t0, t1, xp);
    else if (rt == 6) pack_tiles<6>(xd, x_stride, n_in, n_tok, t0, t1, xp);
    else pack_tiles<14>(xd, x_stride, n_in, n_tok, t0, t1, xp);
}

// dst->src = {packed x, weights...}. The units (a panel of any weight over one token block), in
// order, go to whichever thread asks next (one atomic counter), so a thread slowed by other work on
// its core takes fewer of them instead of holding the others at the graph's barrier. Each thread
// claims its next unit before computing the current one, to prefetch its weights.
void linear_compute(ggml_tensor * dst, int, int, void *) {
    const ggml_tensor * packed = dst->src[0];
    auto * head = (PackedHeader *) packed->data;
    const OvIsa isa = (OvIsa) head->isa;
    const int64_t width = kPanelWidth[(int) isa];
    LinearArgs a;
    a.xp = (const float *) packed->data + kHeaderFloats;
    a.n_in = dst->src[1]->ne[0];
    a.n_tok = dst->ne[1];
    a.xp16 = (const uint32_t *) (a.xp + f32_tiles_floats(a.n_in, a.n_tok));
    a.y = (float *) dst->data;
    a.y_stride = dst->nb[1] / sizeof(float);
    std::vector<int64_t> panel_start = {0};
    std::vector<PanelFn> fns;
    for (int i = 1; i < GGML_MAX_SRC && dst->src[i]; ++i) {
        const ggml_tensor * w = dst->src[i];
        a.weights.push_back({(const char *) w->data, (int64_t) w->nb[1], w->ne[1],
                             i == 1 ? 0 : a.weights.back().out_offset + a.weights.back().rows,
                             ggml_get_type_traits(w->type)});
        fns.push_back(pick_for(w->type, isa, head->bf16));
        panel_start.push_back(panel_start.back() + (w->ne[1] + width - 1) / width);
    }
    thread_local std::vector<float> panel_mem;
    float * panel = ov_aligned_floats(panel_mem, kPanelFloats);

    // Unit u: panel u % n_panels over token block u / n_panels. Panel p: weight index, first row.
    const auto locate = [&](int64_t p, size_t * wi) {
        *wi = 0;
        while (panel_start[*wi + 1] <= p) ++*wi;
        return (p - panel_start[*wi]) * width;
    };
    const int64_t n_panels = panel_start.back();
    const int64_t rt = kTileRows[(int) isa];
    const int64_t n_blocks = (a.n_tok * a.n_in * (int64_t) sizeof(float) + kXBlockBytes - 1) / kXBlockBytes;
    const int64_t block = ((a.n_tok + n_blocks - 1) / n_blocks + rt - 1) / rt * rt;
    const int64_t n_units = n_panels * ((a.n_tok + block - 1) / block);
    int64_t u = head->claim.fetch_add(1, std::memory_order_relaxed);
    while (u < n_units) {
        const int64_t u_next = head->claim.fetch_add(1, std::memory_order_relaxed);
        size_t wi = 0, wn = 0;
        const int64_t r0 = locate(u % n_panels, &wi);
        NextPanel next;
        if (u_next < n_units) {
            next.r0 = locate(u_next % n_panels, &wn);
            next.w = &a.weights[wn];
        }
        const int64_t t0 = u / n_panels * block, t1 = t0 + block < a.n_tok ? t0 + block : a.n_tok;
        fns[wi](a, a.weights[wi], r0, t0, t1, next, panel);
        u = u_next;
    }
}

}  // namespace

bool ov_linear_supports(ggml_type type) {
    return type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16 || type == GGML_TYPE_Q8_0 ||
           type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q5_K || type == GGML_TYPE_Q6_K;
}

bool ov_linear_preferred(ggml_type type) {
    if (!ov_linear_supports(type)) return false;
#if OV_X86
    if (type == GGML_TYPE_BF16 && ov_isa() == OvIsa::avx512 && __builtin_cpu_supports("avx512bf16")) {
        return ov_bf16_dot();
    }
#endif
    return true;
}

const char * ov_linear_kernel(ggml_type type) {
    if (!ov_linear_preferred(type)) return "ggml mul_mat";
    if (type == GGML_TYPE_BF16 && ov_bf16_dot()) return "ov_linear avx512bf16";
    switch (ov_isa()) {
        case OvIsa::avx512: return "ov_linear avx512";
        case OvIsa::avx2: return "ov_linear avx2";
        case OvIsa::base: break;
    }
    return "ov_linear base";
}

ggml_tensor * ov_linear(ggml_context * ctx, ggml_tensor * x, const std::vector<ggml_tensor *> & weights) {
    GGML_ASSERT(x->type == GGML_TYPE_F32 && x->nb[0] == sizeof(float) && ggml_n_dims(x) <= 2);
    GGML_ASSERT(!weights.empty() && weights.size() < GGML_MAX_SRC);
    int64_t n_out = 0;
    for (ggml_tensor * w : weights) {
        GGML_ASSERT(ov_linear_supports(w->type) && ggml_is_contiguous(w) && ggml_n_dims(w) <= 2);
        GGML_ASSERT(w->ne[0] == x->ne[0]);
        GGML_ASSERT(w->type != GGML_TYPE_Q8_0 || ggml_type_size(w->type) == kQ8Bytes);
        n_out += w->ne[1];
    }
    // x once for all threads, in tiles of up to 14 tokens (the widest build's; the build that
    // computes picks its own), in F32 and, with room for it where a weight is BF16, in bf16 pairs;
    // then the product over it: a graph node of its own, so that the barrier after it hands every
    // thread the whole packed x.
    bool bf16 = false, other = false;
    for (ggml_tensor * w : weights) (w->type == GGML_TYPE_BF16 ? bf16 : other) = true;
    const int64_t floats = kHeaderFloats + f32_tiles_floats(x->ne[0], x->ne[1]) +
                           (bf16 ? bf16_tiles_words(x->ne[0], x->ne[1]) : 0);
    ggml_tensor * packed = ggml_custom_4d(ctx, GGML_TYPE_F32, floats, 1, 1, 1, &x, 1, pack_x_compute, GGML_N_TASKS_MAX,
                                          ov_pack_params(bf16, other, 0, 0));
    std::vector<ggml_tensor *> args = {packed};
    args.insert(args.end(), weights.begin(), weights.end());
    return ggml_custom_4d(ctx, GGML_TYPE_F32, n_out, x->ne[1], 1, 1, args.data(), (int) args.size(), linear_compute,
                          GGML_N_TASKS_MAX, nullptr);
}
