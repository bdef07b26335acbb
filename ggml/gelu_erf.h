#pragma once
// Exact (erf) GELU, x * (1 + erf(x / sqrt(2))) / 2, as a vectorised CPU custom op. ggml's own
// ggml_gelu_erf calls erff one element at a time, which made it a tenth of HuBERT's run time.
#include "ggml.h"

// x: [C, T] F32, contiguous; bias: C values F32 added first (a Linear's bias), or null.
// Returns [C, T] F32: GELU(x + bias).
ggml_tensor * ov_gelu_erf(ggml_context * ctx, ggml_tensor * x, ggml_tensor * bias = nullptr);
