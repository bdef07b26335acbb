#pragma once
// 1-D unfold (im2col) and fold (col2im, overlap-add) for channel-innermost activations [C, T], as
// CPU custom ops. With them a Conv1d is unfold + one mul_mat (where ov_conv_1d_direct does not
// apply) and a ConvTranspose1d is a pointwise product to K*C channels + fold, with no transposes:
// the conv weights are rearranged once at load time to match.
#include "ggml.h"

// x: [C, T_in] F32 -> cols [K*C, T_out] F32, column t holding x[:, t*stride + k*dilation - padding]
// for k = 0..K-1 (zeros outside x), T_out = (T_in + 2*padding - dilation*(K-1) - 1) / stride + 1.
// Conv1d weights (OC, IC, K) must be rearranged to [K*IC, OC], row k*IC + ic.
ggml_tensor * ov_unfold_1d(ggml_context * ctx, ggml_tensor * x, int kernel, int stride, int padding, int dilation);

// cols: [K*C, T_in] F32 (row k*C + c: input frame t_in's contribution to output t_in*stride + k -
// padding) -> [C, T_out] F32, each output the sum of its contributions plus bias[c] (bias: C
// values F32, or null). Such cols come from ConvTranspose1d weights (IC, OC, K) rearranged to
// [IC, K*OC] for mul_mat, or to [K*OC, IC] for ov_conv_1d_direct.
ggml_tensor * ov_fold_1d(ggml_context * ctx, ggml_tensor * cols, ggml_tensor * bias, int channels, int stride,
                         int padding, int64_t t_out);
