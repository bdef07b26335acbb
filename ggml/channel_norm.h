#pragma once
// GroupNorm with one group per channel (HuBERT's first feature conv) on channel-innermost
// activations, as a CPU custom op: each channel is normalised over time, then scaled and shifted.
// ggml_norm normalises along ne0, which here is the channel axis, so it would need a transpose
// there and back of the largest activation of the model.
#include "ggml.h"

// x: [C, T] F32 with rows contiguous; weight, bias: C values F32.
// Returns [C, T]: (x - mean_t) / sqrt(var_t + eps) * weight + bias, biased variance.
ggml_tensor * ov_channel_norm(ggml_context * ctx, ggml_tensor * x, ggml_tensor * weight, ggml_tensor * bias,
                              float eps);
