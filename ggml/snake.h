#pragma once
// Snake activation (DAC's Snake1d) as one ggml op:
//   y = x + sin(alpha * x)^2 * inv_alpha,   inv_alpha = 1 / (alpha + 1e-9), both per channel.
// The fused version is a CPU custom op (one pass, rows split across the backend's threads); the
// composed version uses stock ops and runs on any backend.
#include "ggml.h"

// x: [T, C, ...] F32; alpha, inv_alpha: [1, C] F32 (inv_alpha precomputed at load time).
// Returns [T, C, ...] F32, always contiguous.
ggml_tensor * ov_snake(ggml_context * ctx, ggml_tensor * x, ggml_tensor * alpha, ggml_tensor * inv_alpha,
                       bool fused);
