#pragma once
// Which instruction-set build of our hand-dispatched kernels (direct conv, packed linear) runs.
// The widest one the CPU has, capped by OMNIVOICE_SIMD=base|avx2|avx512 at load or by
// ov_set_isa_cap (tests force each path this way on one machine). Any other value of the variable
// leaves the build uncapped.

enum class OvIsa { base = 0, avx2 = 1, avx512 = 2 };

// The build to run now: min(what the CPU supports, the cap).
OvIsa ov_isa();

// Caps the build used by later computes (OvIsa::avx512: no cap); returns the previous cap.
OvIsa ov_set_isa_cap(OvIsa cap);

// Lower-case name of a build ("base", "avx2", "avx512").
const char * ov_isa_name(OvIsa isa);

// Whether the packed linear op runs BF16 weights on vdpbf16ps (bf16 products, F32 sums) instead of
// unpacking them to F32: the CPU has AVX512-BF16, ov_isa() is avx512, and it is not switched off,
// by OMNIVOICE_BF16_DOT=0 at load or by ov_set_bf16_dot (tests and benches compare both this way).
bool ov_bf16_dot();

// Allows (or forbids) the vdpbf16ps build for later computes; returns the previous setting.
bool ov_set_bf16_dot(bool allow);
