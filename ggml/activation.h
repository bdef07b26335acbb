#pragma once
// Element-wise activations whose stock ggml forms are inexact or many nodes long, as CPU custom
// ops computed with the C library's tanh/exp/log1p (what PyTorch's CPU kernels match to an ulp
// or two). Rows are split across the backend's threads; every element is computed the same way
// whatever the thread count.
#include "ggml.h"

// GELU, tanh form (nn.GELU(approximate="tanh")): x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
// ggml_gelu is not this on the CPU: its F32 path looks x up in an fp16 table (GGML_GELU_FP16).
// x: [C, ...] F32, contiguous. Returns the same shape.
ggml_tensor * ov_gelu_tanh(ggml_context * ctx, ggml_tensor * x);

// Mish (nn.Mish): x * tanh(softplus(x)), softplus(x) = log1p(exp(x)). The stock composition
// through ggml_softplus computes log(1 + exp(x)), which loses the relative precision of small
// softplus values (x < -10: 1e-3 and worse).
// x: [C, ...] F32, contiguous. Returns the same shape.
ggml_tensor * ov_mish(ggml_context * ctx, ggml_tensor * x);
