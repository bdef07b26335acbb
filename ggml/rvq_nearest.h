#pragma once
// Nearest codebook entry for each frame, as HiggsAudioV2TokenizerEuclideanCodebook.quantize picks
// it, in one CPU custom op: the argmax over entries j of -((|h|^2 - 2 h.e_j) + |e_j|^2), summed in
// that order, the first index on ties (as torch's max). One graph node instead of ten per codebook.
#include "ggml.h"

// h: [dim, T] F32 (rows contiguous); embed: [dim, n_entries] F32 contiguous.
// Returns [T] I32, the chosen entry of each frame.
ggml_tensor * ov_rvq_nearest(ggml_context * ctx, ggml_tensor * h, ggml_tensor * embed);
