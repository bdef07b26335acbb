#pragma once
// Sopro's semantic LM (sopro 2.2.0 nn/model.py + nn/ar.py) on the shared CausalDecoder: the text and
// semantic embeddings, the style prefix (learned queries cross-attending to the reference's first
// tokens), the 12-block causal body with per-head q/k RMSNorm and NEOX RoPE (LayerScale folded into
// out_proj/down_proj by the converter), out_norm and token_head. Weights come from the `model.*`
// tensors of a `sopro-tts` GGUF (docs/gguf-layout.md).
//
// A SemanticLMSession holds one KV cache: prefill() resets it with the prefix
// [style_prefix(style) | text | prompt | BOS], step() appends generated tokens. Graphs are built once
// per shape (prefix lengths; step token count and KV bucket) and kept with their compute buffers.
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "ggml-alloc.h"
#include "nn/causal_decoder.h"
#include "nn/layers.h"
#include "runtime/backend.h"
#include "runtime/gguf_file.h"

namespace ov {

// The `sopro-tts.model.*` metadata the LM reads.
struct SemanticLMHParams {
    CausalDecoderHParams decoder;
    int64_t latent_dim = 0;       // semantic_tok_emb width, sem_in_proj's input
    int64_t text_vocab = 0;       // text_tok_emb rows
    int64_t semantic_vocab = 0;   // FSQ codes; BOS = semantic_vocab, EOS = semantic_vocab + 1
    int64_t n_style = 0;          // style_prefix_tokens: learned queries
    int64_t max_text_len = 0;

    int64_t bos() const { return semantic_vocab; }
    int64_t eos() const { return semantic_vocab + 1; }
    int64_t n_logits() const { return semantic_vocab + 2; }

    static SemanticLMHParams load(const GGUFFile & file);
};

class SemanticLM {
public:
    // Takes the LM's tensors from `file` (which the caller keeps and may hand to other stages
    // before calling check_all_consumed()).
    SemanticLM(std::shared_ptr<GGUFFile> file, BackendPtr backend);

    const SemanticLMHParams & hparams() const { return hp_; }
    const BackendPtr & backend() const { return backend_; }
    const GGUFFile & file() const { return *file_; }

    // Graph pieces, used by the sessions.
    // ids I32 [n] -> sem_in_proj(semantic_tok_emb[ids]) [n_embd, n]
    ggml_tensor * embed_semantic(ggml_context * ctx, ggml_tensor * ids) const;
    // style token ids I32 [n] (or null when n = 0) -> StylePrefixEncoder output [n_embd, n_style]
    ggml_tensor * style_prefix(ggml_context * ctx, ggml_tensor * ids, const GraphOptions & opt) const;
    ggml_tensor * text_embedding(ggml_context * ctx, ggml_tensor * ids) const;
    // hidden (out_norm applied) [n_embd, n] -> logits [n_logits, n]
    ggml_tensor * head(ggml_context * ctx, ggml_tensor * hidden) const { return token_head_.forward(ctx, hidden); }
    const CausalDecoder & decoder() const { return decoder_; }

private:
    std::shared_ptr<GGUFFile> file_;
    BackendPtr backend_;
    SemanticLMHParams hp_;
    ggml_tensor * text_tok_emb_ = nullptr;      // [n_embd, text_vocab]
    ggml_tensor * semantic_tok_emb_ = nullptr;  // [latent_dim, semantic_vocab + 2]
    Linear sem_in_proj_;
    ggml_tensor * queries_ = nullptr;           // [n_embd, n_style], F32
    ggml_tensor * kv_norm_ = nullptr;
    Linear style_q_, style_k_, style_v_, style_o_;
    ggml_tensor * style_out_norm_ = nullptr;
    CausalDecoder decoder_;
    Linear token_head_;
};

class SemanticLMSession {
public:
    // n_ctx: positions the cache holds (prefix + generated tokens), rounded up to kKVBucket.
    SemanticLMSession(std::shared_ptr<const SemanticLM> lm, int64_t n_ctx);
    ~SemanticLMSession();
    SemanticLMSession(const SemanticLMSession &) = delete;
    SemanticLMSession & operator=(const SemanticLMSession &) = delete;

    const SemanticLM & lm() const { return *lm_; }
    int64_t n_ctx() const { return cache_.n_ctx(); }
    int64_t length() const { return length_; }  // positions in the cache

    // Resets the cache and runs the prefix; returns the logits after BOS [n_logits].
    std::vector<float> prefill(const std::vector<int32_t> & text, const std::vector<int32_t> & style,
                               const std::vector<int32_t> & prompt);
    // Appends tokens (semantic ids) at the next positions; returns the logits after each,
    // row-major [tokens.size(), n_logits] (teacher forcing: all of them in one graph).
    std::vector<float> step(const std::vector<int32_t> & tokens);
    // The prefix embeddings alone, row-major [8 + text + prompt + 1, n_embd] (no cache change).
    std::vector<float> prefix(const std::vector<int32_t> & text, const std::vector<int32_t> & style,
                              const std::vector<int32_t> & prompt);

private:
    struct Graph {
        ggml_context * ctx = nullptr;
        ggml_cgraph * graph = nullptr;
        ggml_tensor * text = nullptr, * style = nullptr, * sem = nullptr;  // I32 inputs (null if unused)
        DecoderBatch batch;                                                // n_tokens = 0: no decoder
        ggml_tensor * out = nullptr;
        ggml_gallocr_t allocr = nullptr;  // its own compute buffer
        void free();
    };
    // (kind, n_text, n_style, n_sem, n_kv)
    using Key = std::tuple<int, int64_t, int64_t, int64_t, int64_t>;
    enum Kind { kPrefill, kStep, kPrefix };

    Graph & graph(Kind kind, int64_t n_text, int64_t n_style, int64_t n_sem, int64_t n_kv);
    void check_ids(const std::vector<int32_t> & ids, int64_t limit, const char * what) const;
    std::vector<float> run(Graph & g, const std::vector<int32_t> & text, const std::vector<int32_t> & style,
                           const std::vector<int32_t> & sem, int64_t start);

    std::shared_ptr<const SemanticLM> lm_;
    KVCache cache_;
    int64_t length_ = 0;
    GraphOptions opt_;
    std::map<Key, Graph> graphs_;
};

}  // namespace ov
