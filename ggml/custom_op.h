#pragma once
// Helpers shared by our CPU custom ops (snake, unfold/fold, direct conv, linear, attention).
#include <cstdint>
#include <vector>

#include "ggml.h"

// OV_X86: per-instruction-set builds (GCC target attributes) are available. Hot loops are
// compiled for AVX-512, AVX2 and baseline x86-64 and picked when the library loads
// (OV_SIMD_CLONES) or by ov_isa() (isa.h), so a portable build still runs vector code sized for
// the machine it lands on.
#if defined(__x86_64__) && defined(__GNUC__)
#define OV_X86 1
#define OV_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define OV_X86 0
#define OV_SIMD_CLONES
#endif

// Vectors of L floats and of L int32 (GCC vector extensions); L is picked per instruction set
// (16 for AVX-512, 8 for AVX2, 4 else).
template <int L>
struct OvVec {
    typedef float f __attribute__((vector_size(L * sizeof(float))));
    typedef int32_t i __attribute__((vector_size(L * sizeof(int32_t))));
};

// `buf` grown to hold n floats from its first 64-byte (cache-line) boundary, which is returned:
// per-thread scratch reused across computes.
inline float * ov_aligned_floats(std::vector<float> & buf, size_t n) {
    if (buf.size() < n + 16) buf.resize(n + 16);
    return (float *) (((uintptr_t) buf.data() + 63) & ~(uintptr_t) 63);
}

// A custom op's few integer parameters travel packed in its userdata pointer (four 16-bit
// fields), so they need no storage that outlives graph building.
inline void * ov_pack_params(int64_t a, int64_t b, int64_t c, int64_t d) {
    constexpr int64_t max = 0xFFFF;
    GGML_ASSERT(a >= 0 && b >= 0 && c >= 0 && d >= 0 && a <= max && b <= max && c <= max && d <= max);
    return (void *) (uintptr_t) ((uint64_t) a | (uint64_t) b << 16 | (uint64_t) c << 32 | (uint64_t) d << 48);
}

inline int64_t ov_param(void * packed, int i) {
    return (int64_t) (((uint64_t) (uintptr_t) packed >> (16 * i)) & 0xFFFF);
}

// Range [*begin, *end) of [0, n) for thread ith of nth: contiguous, near-equal parts.
inline void ov_thread_range(int64_t n, int ith, int nth, int64_t * begin, int64_t * end) {
    const int64_t per = (n + nth - 1) / nth;
    *begin = per * ith < n ? per * ith : n;
    *end = *begin + per < n ? *begin + per : n;
}
