#pragma once
// Exact (erf) GELU, x * (1 + erf(x / sqrt(2))) / 2, as a vectorised CPU custom op. ggml's own
// ggml_gelu_erf calls erff one element at a time, which made it a tenth of HuBERT's run time.
#include "ggml.h"

// x: any shape, F32, contiguous -> same shape F32.
ggml_tensor * ov_gelu_erf(ggml_context * ctx, ggml_tensor * x);
