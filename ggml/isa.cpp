#include "isa.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace {

OvIsa cpu_isa() {
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("x86-64-v4")) return OvIsa::avx512;
    if (__builtin_cpu_supports("x86-64-v3")) return OvIsa::avx2;
#endif
    return OvIsa::base;
}

OvIsa env_cap() {
    const char * env = std::getenv("OMNIVOICE_SIMD");
    if (env && std::strcmp(env, "base") == 0) return OvIsa::base;
    if (env && std::strcmp(env, "avx2") == 0) return OvIsa::avx2;
    return OvIsa::avx512;
}

std::atomic<int> & cap() {
    static std::atomic<int> value{(int) env_cap()};
    return value;
}

std::atomic<bool> & bf16_allowed() {
    static std::atomic<bool> value{[] {
        const char * env = std::getenv("OMNIVOICE_BF16_DOT");
        return !(env && std::strcmp(env, "0") == 0);
    }()};
    return value;
}

}  // namespace

OvIsa ov_isa() {
    static const OvIsa cpu = cpu_isa();
    const int c = cap().load(std::memory_order_relaxed);
    return (int) cpu < c ? cpu : (OvIsa) c;
}

bool ov_bf16_dot() {
#if defined(__x86_64__) && defined(__GNUC__)
    static const bool cpu = __builtin_cpu_supports("avx512bf16");
#else
    constexpr bool cpu = false;
#endif
    return cpu && ov_isa() == OvIsa::avx512 && bf16_allowed().load(std::memory_order_relaxed);
}

bool ov_set_bf16_dot(bool allow) { return bf16_allowed().exchange(allow); }

OvIsa ov_set_isa_cap(OvIsa new_cap) { return (OvIsa) cap().exchange((int) new_cap); }

const char * ov_isa_name(OvIsa isa) {
    switch (isa) {
        case OvIsa::base: return "base";
        case OvIsa::avx2: return "avx2";
        case OvIsa::avx512: return "avx512";
    }
    return "?";
}
