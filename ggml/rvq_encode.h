#pragma once
// HiggsAudioV2TokenizerResidualVectorQuantization.encode as one CPU custom op: for every frame,
// codebook after codebook, project the residual in, take the nearest entry (the reference's
// distance -((|h|^2 - 2 h.e) + |e|^2), first index on ties, as torch's max), and subtract that
// entry projected out. Frames are independent, so threads split them; the graph gets one node
// where a per-codebook build had seven, each a thread barrier.
#include "ggml.h"

// x: [hidden, T] F32 (rows contiguous). The n_q codebooks' weights, each kind laid end to end
// (DerivedWeights::concat): w_in [hidden * dim * n_q] (project_in, nn.Linear (dim, hidden) each),
// b_in [dim * n_q], embed [dim * size * n_q], w_out [dim * hidden * n_q] (project_out, (hidden,
// dim) each), b_out [hidden * n_q]; all F32 but w_in and w_out, which may be F16.
// Returns [T, n_q] I32: row q holds codebook q's ids.
ggml_tensor * ov_rvq_encode(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w_in, ggml_tensor * b_in,
                            ggml_tensor * embed, ggml_tensor * w_out, ggml_tensor * b_out, int n_q);
