#pragma once
// Depthwise 1-D convolution (nn.Conv1d with groups = channels) on channel-innermost activations
// as a CPU custom op: each output step is K weight rows times K input rows, vectorised over the
// channels. ggml's own ggml_conv_1d_dw is im2col on time-innermost data (its header says it is
// likely wrong for some cases) and would need a transpose either side. Padding may be asymmetric
// (Sopro's "same" k5 at dilation 8 pads 16/16, causal convs pad on the left only).
#include "ggml.h"

// x: [C, T_in] F32, rows read through their stride; weight: [C, K] F32 (row k holds tap k of
// every channel: PyTorch's (C, 1, K) rearranged at load time); bias: C values F32 or null.
// Returns [C, T_out], T_out = T_in + pad_left + pad_right - dilation*(K-1), stride 1.
ggml_tensor * ov_conv_1d_dw(ggml_context * ctx, ggml_tensor * x, ggml_tensor * weight, ggml_tensor * bias,
                            int pad_left, int pad_right, int dilation);
