#pragma once
// softmax(scale * q k^T) v of packed segments as a CPU custom op: every segment attends to itself
// only (upstream's block-diagonal mask without computing the masked blocks), all segments and
// heads in one op. Query heads share KV heads (GQA): head h reads KV head h / (n_head / n_head_kv),
// and the query rows of all heads of one KV head are computed together against its keys.
#include <atomic>
#include <cstdint>
#include <vector>

#include "ggml.h"

// What the op reads when it computes: keep it alive, unchanged, as long as a graph using it, and
// compute one such graph at a time (the op hands out its work through the counters here).
struct OvAttentionParams {
    float scale = 1.0f;
    std::vector<int64_t> segments;  // token counts in order, each >= 1; their sum is q's tokens
    mutable std::atomic<int64_t> next_item{0};    // the next item to hand out; 0 between computes
    mutable std::atomic<int> threads_done{0};     // threads past their last claim; 0 between computes
};

// q: [hd, n_head, n_tokens], k/v: [hd, n_head_kv, n_tokens], F32, rows contiguous (views with any
// head and token strides, e.g. of a stacked q|k|v projection) -> [hd, n_head, n_tokens].
ggml_tensor * ov_attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v,
                           const OvAttentionParams * params);
