#pragma once
// Snake activation (DAC's Snake1d) as one ggml op:
//   y = x + sin(alpha * x)^2 * inv_alpha,   inv_alpha = 1 / (alpha + 1e-9), both per channel.
// The fused version is a CPU custom op (one pass, rows split across the backend's threads); the
// composed version uses stock ops and runs on any backend.
#include "ggml.h"

// x: [C, T, ...] F32 (channels innermost); alpha, inv_alpha: C values F32 (inv_alpha precomputed
// at load time). Returns [C, T, ...] F32, contiguous.
ggml_tensor * ov_snake(ggml_context * ctx, ggml_tensor * x, ggml_tensor * alpha, ggml_tensor * inv_alpha,
                       bool fused);
