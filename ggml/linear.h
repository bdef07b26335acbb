#pragma once
// y = W x for weights in the GGUF's own layout ([IN, OUT] in ggml order: one row of IN values per
// output), as a CPU custom op. Each thread takes a range of 16-output panels (32 with AVX-512);
// per chunk of 256 inputs it unpacks a panel once into an F32 [256][16] block in L1 (F32 copied,
// BF16 shifted, F16 converted, Q8_0 scaled), then every token reuses it: vectors along the outputs
// times broadcast inputs, 6 tokens x 16 outputs of accumulators (AVX2). The weights are never
// copied or transposed at load, and every type runs at the F32 FMA rate with its own memory
// traffic.
#include <vector>

#include "ggml.h"

// The weight types the op reads.
bool ov_linear_supports(ggml_type type);

// Whether a model should run `type` through ov_linear rather than ggml's mul_mat on this CPU: every
// supported type, except BF16 where the CPU has AVX512-BF16 and our build may use AVX-512. There
// ggml's vdpbf16ps GEMM beats any F32 FMA kernel (Zen 5, issue 11: 620 against an F32 peak of 514
// GFLOP/s); a vdpbf16ps build of our own would round the activations to bf16 and is not written.
bool ov_linear_preferred(ggml_type type);

// x: [IN, N] F32 (rows may be strided); weights: 1 to 9 tensors [IN, OUT_i], each contiguous, of
// any type ov_linear_supports (they may differ). Returns [sum OUT_i, N]: the weights' outputs
// stacked in order, as one product with their concatenation (e.g. q|k|v) without building it.
ggml_tensor * ov_linear(ggml_context * ctx, ggml_tensor * x, const std::vector<ggml_tensor *> & weights);
