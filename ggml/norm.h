#pragma once
// Normalisations with their affine part in one CPU custom op each, on channel-innermost [C, T]
// activations: one graph node instead of norm, mul and add.
#include "ggml.h"

// nn.LayerNorm(C) over each time step's channels, of v = (x + x_bias) + residual when those are
// given: a Linear's output (bias added here) joined to its residual, in the reference's order.
// x, residual: [C, T] F32 with rows contiguous; weight, bias, x_bias: C values F32.
// Returns [C, T]: (v - mean_c) / sqrt(var_c + eps) * weight + bias, biased variance.
ggml_tensor * ov_layer_norm(ggml_context * ctx, ggml_tensor * x, ggml_tensor * weight, ggml_tensor * bias, float eps,
                            ggml_tensor * residual = nullptr, ggml_tensor * x_bias = nullptr);

// nn.GroupNorm(C, C), one group per channel (HuBERT's first feature conv): each channel is
// normalised over time. (ggml_norm works along ne0, the channel axis here.)
// x: [C, T] F32 with rows contiguous; weight, bias: C values F32.
// Returns [C, T]: (x - mean_t) / sqrt(var_t + eps) * weight + bias, biased variance.
ggml_tensor * ov_channel_norm(ggml_context * ctx, ggml_tensor * x, ggml_tensor * weight, ggml_tensor * bias,
                              float eps);
