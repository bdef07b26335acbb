#pragma once
// MaskGIT's scoring of every cell (target frame, codebook) of a step as one CPU custom op: per
// cell, b = (1 + g) c - g u from its cond and uncond logits (b = c when g = 0), the best
// non-mask class of b and -log(sum_v exp(b_v - b_best)), which is the max over non-mask
// classes of upstream's log_softmax(c' + g (c' - u')) (see Qwen3Session::build_scoring). One
// pass per cell in cache, threads over cells: the stock-op form of the same formula makes ten
// passes over 16 MB tensors at 250 frames.
#include "ggml.h"

// logits: [n_codebook * n_vocab, n_target] F32; cond_rows (and uncond_rows when guidance != 0):
// I32 [n_rows], the logits columns of each item's cond (uncond) targets.
// Returns F32 [2, n_rows * n_codebook]: per cell (row r, codebook k at r * n_codebook + k) its
// score and its best class as a float (exact: classes < 2^24). exp(b_v - b_best) is clamped at
// e^80, as the stock form does.
ggml_tensor * ov_maskgit_score(ggml_context * ctx, ggml_tensor * logits, ggml_tensor * cond_rows,
                               ggml_tensor * uncond_rows, int n_vocab, int mask_id, float guidance);
