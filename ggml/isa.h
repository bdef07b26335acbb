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
