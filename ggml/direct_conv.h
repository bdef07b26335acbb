#pragma once
// Direct 1-D convolution on channel-innermost activations as a CPU custom op, vectorised over
// output channels: each output step accumulates weight rows (OC wide) scaled by broadcast input
// values, for blocks of steps and channels held in registers. No unfolded copy of the input, and
// an efficient inner loop even for narrow layers (32 channels), where dot-product GEMMs spend
// most of their time on horizontal sums.
#include "ggml.h"

// Output channels go in vectors of up to 16 floats, the last ones in vectors of 8 or 4: the op
// needs OC (per group, with groups) to be a multiple of 4.
constexpr int OV_DIRECT_CONV_LANES = 4;

// x: [IC, T_in] F32; weight: [OC, K*IC] F32 (row k*IC + ic holds the OC weights of tap k, input
// channel ic; PyTorch's Conv1d (OC, IC, K) rearranged at load time); bias: OC values or null;
// residual: [OC, T_out] or null, added to the result. With groups (nn.Conv1d's), IC and OC split
// into that many groups, output group g reading input group g only: weight [OC, K*IC/groups]
// (PyTorch's (OC, IC/groups, K), rearranged the same way).
// Returns [OC, T_out], T_out = (T_in + 2*padding - dilation*(K-1) - 1) / stride + 1.
ggml_tensor * ov_conv_1d_direct(ggml_context * ctx, ggml_tensor * x, ggml_tensor * weight, ggml_tensor * bias,
                                ggml_tensor * residual, int kernel, int stride, int padding, int dilation,
                                int groups = 1);
