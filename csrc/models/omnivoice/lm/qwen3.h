#pragma once
// OmniVoice's language model: the hybrid text/audio input embedding (`_prepare_embed_inputs`),
// the bidirectional Qwen3 body (`OmniVoice.llm`) and the per-codebook output head
// (`audio_heads`), loaded from an `omnivoice-lm` GGUF.
//
// One MaskGIT step runs several sequences PACKED into one: per item a cond segment (the whole
// prompt) and an uncond segment (the target tokens only), each attending only within itself,
// with positions restarting at 0. A Qwen3Session builds and allocates that graph once for a
// fixed packing; the steps of a generation then only upload new token ids and audio masks.
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "attention.h"
#include "ggml-alloc.h"
#include "nn/layers.h"
#include "runtime/backend.h"
#include "runtime/gguf_file.h"

namespace ov {

// Hyper-parameters of the `omnivoice-lm` metadata (docs/gguf-layout.md).
struct Qwen3HParams {
    int64_t n_layer = 0;
    int64_t n_embd = 0;
    int64_t n_ff = 0;
    int64_t n_head = 0;
    int64_t n_head_kv = 0;
    int64_t n_embd_head = 0;
    int64_t n_vocab = 0;
    int64_t n_ctx_train = 0;
    float rms_eps = 0.0f;
    float rope_freq_base = 0.0f;

    int64_t n_codebook = 0;   // audio codebooks, one embedding table slice and head slice each
    int64_t audio_vocab = 0;  // entries per codebook, the mask token included
    int64_t audio_mask_id = 0;
    std::vector<float> audio_codebook_weights;

    static Qwen3HParams load(const GGUFFile & file);
};

// Qwen3DecoderLayer (used bidirectionally).
struct Qwen3Layer {
    ggml_tensor * attn_norm = nullptr;  // input_layernorm
    Linear wq, wk, wv, wo;  // self_attn.{q,k,v,o}_proj, bias-free
    ggml_tensor * q_norm = nullptr;
    ggml_tensor * k_norm = nullptr;
    ggml_tensor * ffn_norm = nullptr;  // post_attention_layernorm
    Linear ffn_gate, ffn_up, ffn_down;  // mlp.{gate,up,down}_proj, bias-free
    // Weights joined end to end (1-D) so one mul_mat converts the normed input once: q|k|v and
    // gate|up, when those Linears run mul_mat on one type; else null (packed ones stack their
    // outputs in one ov_linear; mixed types run one by one).
    ggml_tensor * wqkv = nullptr;
    ggml_tensor * ffn_gate_up = nullptr;
};

struct Qwen3Weights {
    ggml_tensor * embed_tokens = nullptr;      // llm.embed_tokens: [n_embd, n_vocab]
    std::vector<Qwen3Layer> layers;
    ggml_tensor * norm = nullptr;              // llm.norm
    ggml_tensor * audio_embeddings = nullptr;  // [n_embd, n_codebook * audio_vocab]
    Linear audio_heads;                        // n_embd -> n_codebook * audio_vocab, bias-free
};

// The weights of one `omnivoice-lm` GGUF on a backend. Immutable once loaded; shared by sessions.
class Qwen3Model {
public:
    Qwen3Model(const std::string & path, BackendPtr backend);

    const GGUFFile & file() const { return *file_; }
    const Qwen3HParams & hparams() const { return hp_; }
    const Qwen3Weights & weights() const { return w_; }
    const BackendPtr & backend() const { return backend_; }
    // Serialises graph computes of every session of this model on the shared backend.
    std::mutex & compute_mutex() const { return compute_mutex_; }

private:
    BackendPtr backend_;
    std::unique_ptr<GGUFFile> file_;
    std::unique_ptr<DerivedWeights> derived_;  // projections joined for mul_mat (non-CPU backends)
    Qwen3HParams hp_;
    Qwen3Weights w_;
    mutable std::mutex compute_mutex_;
};

// One packed sequence: `length` tokens of which [target_start, target_start + target_len) are
// the audio positions whose logits the step needs.
struct PackedSegment {
    int64_t length = 0;
    int64_t target_start = 0;
    int64_t target_len = 0;
};

// A fixed packing of segments, with its graph built and its compute buffer allocated once.
// With a guidance scale the graph also scores every cell of every item as MaskGIT does, so a
// step returns two numbers per cell instead of its logits (16 MB at 250 frames).
class Qwen3Session {
public:
    // guidance_scale: build the scoring too. Non-zero: segments are (cond, uncond) pairs, one per
    // item, of equal target length; zero: every segment is an item's cond segment.
    Qwen3Session(std::shared_ptr<const Qwen3Model> model, std::vector<PackedSegment> segments,
                 std::optional<float> guidance_scale = std::nullopt);
    ~Qwen3Session();
    Qwen3Session(const Qwen3Session &) = delete;
    Qwen3Session & operator=(const Qwen3Session &) = delete;

    const Qwen3Model & model() const { return *model_; }
    int64_t n_tokens() const { return n_tokens_; }
    int64_t n_target() const { return n_target_; }
    const std::vector<PackedSegment> & segments() const { return segments_; }

    // ids: row-major [n_codebook, n_tokens]; audio_mask: [n_tokens]. Text positions read row 0
    // (< n_vocab), audio positions every row (< audio_vocab); anything else is InvalidInput.
    // logits: row-major [n_target, n_codebook, audio_vocab], the target windows in segment order.
    void forward(const int32_t * ids, const bool * audio_mask, float * logits);

    bool scores_cells() const { return scores_ != nullptr; }
    // Cells scored per step: n_codebook x the items' target lengths (cond segments only).
    int64_t n_cells() const { return n_cells_; }
    // Runs the step and returns MaskGIT's cell scores instead of logits (needs a guidance scale
    // at construction): for each item's target frame (row-major [frame, codebook], items in
    // order) the max and argmax over classes of log_softmax(c + g * (c - u)) of the
    // log-softmaxed cond and uncond logits (log_softmax(c) when g = 0), the mask id excluded:
    // upstream's _predict_tokens_with_scoring with class_temperature 0.
    void score(const int32_t * ids, const bool * audio_mask, float * scores, int32_t * best);

private:
    void build_graph();
    void build_scoring(float guidance_scale);
    void compute(const int32_t * ids, const bool * audio_mask);
    ggml_tensor * build_attention(ggml_tensor * q, ggml_tensor * k, ggml_tensor * v);
    void fill_inputs(const int32_t * ids, const bool * audio_mask);

    std::shared_ptr<const Qwen3Model> model_;
    std::vector<PackedSegment> segments_;
    int64_t n_tokens_ = 0;
    int64_t n_target_ = 0;

    ggml_context * ctx_ = nullptr;
    ggml_cgraph * graph_ = nullptr;
    ggml_gallocr_t allocr_ = nullptr;

    // Graph inputs and their host copies (re-uploaded every step: the allocator may reuse an
    // input's memory once its last consumer has run).
    ggml_tensor * text_ids_ = nullptr;    // I32 [n_tokens]
    ggml_tensor * audio_ids_ = nullptr;   // I32 [n_tokens, n_codebook]
    ggml_tensor * text_keep_ = nullptr;   // F32 [1, n_tokens]: 1 at text positions
    ggml_tensor * audio_keep_ = nullptr;  // F32 [1, n_tokens]: 1 at audio positions
    ggml_tensor * pos_ = nullptr;         // I32 [n_tokens]
    ggml_tensor * target_rows_ = nullptr; // I32 [n_target]
    ggml_tensor * logits_ = nullptr;      // F32 [n_codebook * audio_vocab, n_target]
    // Scoring (with a guidance scale only)
    ggml_tensor * cond_rows_ = nullptr;   // I32 [n_cells / n_codebook]: logits columns of cond targets
    ggml_tensor * uncond_rows_ = nullptr; // I32, the same for uncond targets (guided)
    ggml_tensor * class_mask_ = nullptr;  // F32 [audio_vocab]: -inf at the mask id, else 0
    ggml_tensor * scores_ = nullptr;      // F32 [1, n_cells], or ov_maskgit_score's [2, n_cells] (CPU path)
    ggml_tensor * best_ = nullptr;        // I32 [n_cells] (stock ops)
    int64_t n_cells_ = 0;

    OvAttentionParams attn_params_;  // read by every layer's ov_attention when the graph computes

    std::vector<int32_t> text_ids_host_;
    std::vector<int32_t> audio_ids_host_;
    std::vector<float> text_keep_host_;
    std::vector<float> audio_keep_host_;
    std::vector<int32_t> pos_host_;
    std::vector<int32_t> target_rows_host_;
    std::vector<int32_t> cond_rows_host_;
    std::vector<int32_t> uncond_rows_host_;
    std::vector<float> class_mask_host_;
};

}  // namespace ov
