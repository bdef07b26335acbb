#pragma once
// One pre-norm causal transformer decoder with a KV cache, shared by the families that decode
// autoregressively (Sopro's semantic LM now; MOSS's Qwen3 LM and Whisper's decoder reuse it).
// Embeddings in, hidden states out: each family keeps its own embeddings, heads and sampling,
// and builds its graphs around CausalDecoder::forward.
//
// A layer is  x += o(attn(norm(x))),  with cross-attention  x += o'(attn(q'(norm(x)), K', V')),  then
// x += ffn(norm(x));  its variants per family set by CausalDecoderHParams, not by branches in the
// layer loop: RMSNorm or LayerNorm, per-head q/k RMSNorm, NEOX RoPE or none, SwiGLU or GELU(erf)
// FFN, a bias on any projection, GQA, cross-attention (Whisper) over a CrossCache computed once per
// input (K'/V' of every layer from the encoder states, unmasked).
//
// The cache (KVCache, one per session) holds K and V of every layer for n_ctx positions, F32
// [head_dim * n_head_kv, n_ctx] (a position's K is one row). A call writes its n_tokens new rows
// at positions [start, start + n_tokens) with ggml_set_rows and attends to the first n_kv
// positions under a causal F16 mask (-inf past each query's position), so one graph serves every
// start: n_kv is rounded up to a bucket (kKVBucket), and the one-token step graph is built once per
// bucket, not per step. Cache rows past the written length are zeroed at creation and masked.
// Attention is ggml_flash_attn_ext (F32 precision) or, on the stock-op path, mul_mat + soft_max_ext
// with the same mask + mul_mat: stock ggml ops either way, so any backend runs it.
#include <cstdint>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"
#include "nn/layers.h"
#include "runtime/backend.h"
#include "runtime/gguf_file.h"

namespace ov {

// Positions attended per call are a multiple of this: a step graph serves 256 positions (about
// 11 s of Sopro tokens) before the next one is built. Masked positions cost their share of the
// attention only (at 512 wide, 12 layers: 256 positions of K and V are 12 MB per step).
constexpr int64_t kKVBucket = 256;

struct CausalDecoderHParams {
    enum class Norm { rms, layer };
    enum class Rope { none, neox };
    enum class Ffn { swiglu, gelu_erf };

    int64_t n_layer = 0;
    int64_t n_embd = 0;
    int64_t n_head = 0;
    int64_t n_head_kv = 0;
    int64_t head_dim = 0;
    int64_t n_ff = 0;
    Norm norm = Norm::rms;  // every norm of the decoder (LayerNorm: with weight and bias)
    float norm_eps = 1e-6f;
    bool qk_norm = false;   // per-head RMSNorm of q and k (weights [head_dim]) before RoPE, eps norm_eps
    Rope rope = Rope::none;
    float rope_base = 10000.0f;  // RoPE over all head_dim dims, positions from 0
    Ffn ffn = Ffn::swiglu;
    // Projections with a bias: q, k, v, o of attention, and the FFN's (all of them).
    bool bias_q = false, bias_k = false, bias_v = false, bias_o = false, bias_ffn = false;
    bool final_norm = true;  // a norm after the last layer (the hidden states returned are normed)
    // Cross-attention after self-attention in every layer, keys/values projected from encoder
    // states n_embd_cross wide (same heads and bias flags as self-attention; no RoPE, no q/k norm).
    bool cross_attention = false;
    int64_t n_embd_cross = 0;

    // Throws ModelFormatError (naming `where`) when the sizes do not fit together.
    void check(const std::string & where) const;
};

// Tensor names: layer il's tensors are join_name(layers, il, <part>, "weight"/"bias"); parts not
// used by the hparams are ignored. The GELU FFN uses ffn_up (in) and ffn_down (out).
struct CausalDecoderNames {
    std::string layers;
    std::string attn_norm, q, k, v, o, q_norm, k_norm;
    std::string ffn_norm, ffn_gate, ffn_up, ffn_down;
    std::string cross_norm, cross_q, cross_k, cross_v, cross_o;
    std::string final_norm;  // a full prefix
};

// A norm's weights: RMSNorm (bias null) or LayerNorm.
struct DecoderNorm {
    ggml_tensor * weight = nullptr;
    ggml_tensor * bias = nullptr;
};

struct DecoderLayer {
    DecoderNorm attn_norm, ffn_norm;
    Linear q, k, v, o;
    ggml_tensor * q_norm = nullptr;  // [head_dim], or null
    ggml_tensor * k_norm = nullptr;
    Linear ffn_gate, ffn_up, ffn_down;  // ffn_gate unused by the GELU FFN
    DecoderNorm cross_norm;             // cross-attention only
    Linear cross_q, cross_k, cross_v, cross_o;
};

// The K/V of every layer for n_ctx positions, in a backend buffer of its own.
class KVCache {
public:
    KVCache(const CausalDecoderHParams & hp, int64_t n_ctx, const Backend & backend);
    ~KVCache();
    KVCache(const KVCache &) = delete;
    KVCache & operator=(const KVCache &) = delete;

    int64_t n_ctx() const { return n_ctx_; }
    ggml_tensor * k(int64_t il) const { return k_[il]; }  // F32 [head_dim * n_head_kv, n_ctx]
    ggml_tensor * v(int64_t il) const { return v_[il]; }

private:
    int64_t n_ctx_ = 0;
    ggml_context * ctx_ = nullptr;
    ggml_backend_buffer_t buffer_ = nullptr;
    std::vector<ggml_tensor *> k_, v_;
};

// The cross-attention K/V of every layer for n_cross encoder positions, in a buffer of its own:
// filled once per input by a graph ending in CausalDecoder::cross_kv, then read by every call.
class CrossCache {
public:
    CrossCache(const CausalDecoderHParams & hp, int64_t n_cross, const Backend & backend);
    ~CrossCache();
    CrossCache(const CrossCache &) = delete;
    CrossCache & operator=(const CrossCache &) = delete;

    int64_t n_cross() const { return n_cross_; }
    ggml_tensor * k(int64_t il) const { return k_[il]; }  // F32 [head_dim * n_head_kv, n_cross]
    ggml_tensor * v(int64_t il) const { return v_[il]; }

private:
    int64_t n_cross_ = 0;
    ggml_context * ctx_ = nullptr;
    ggml_backend_buffer_t buffer_ = nullptr;
    std::vector<ggml_tensor *> k_, v_;
};

// The decoder's own graph inputs for one call shape (n_tokens new, n_kv attended); set() uploads
// them for a start position once the graph is allocated.
struct DecoderBatch {
    int64_t n_tokens = 0;
    int64_t n_kv = 0;
    ggml_tensor * pos = nullptr;   // I32 [n_tokens]: start + i (RoPE; null without)
    ggml_tensor * rows = nullptr;  // I64 [n_tokens]: cache rows written, start + i
    ggml_tensor * mask = nullptr;  // F16 [n_kv, n_tokens]: 0 where key j <= start + i, else -inf

    // Throws InvalidInput if [start, start + n_tokens) does not fit in n_kv.
    void set(int64_t start) const;
};

class CausalDecoder {
public:
    // Weights looked up by exact name with strict shapes; `types` the storage types the
    // projections accept, packed (ov_linear) when `allow_packed` (a CPU backend, not stock ops).
    void load(GGUFFile & file, const CausalDecoderNames & names, const CausalDecoderHParams & hp,
              const std::vector<ggml_type> & types, bool allow_packed);

    const CausalDecoderHParams & hparams() const { return hp_; }

    // The inputs of a call of n_tokens attending to n_kv cache positions (n_kv a multiple of
    // kKVBucket, at most the cache's n_ctx; see bucket()).
    DecoderBatch batch(ggml_context * ctx, int64_t n_tokens, int64_t n_kv) const;
    // Positions a call ending at position `end` (exclusive) attends to: end rounded up to kKVBucket.
    static int64_t bucket(int64_t end) { return (end + kKVBucket - 1) / kKVBucket * kKVBucket; }

    // x: [n_embd, n_tokens] -> hidden states [n_embd, n_tokens] (final-normed if the hparams say
    // so). Writes the new K/V rows into `cache` as part of the graph.
    // With cross-attention, `cross` must be given (filled by cross_kv).
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * x, const KVCache & cache, const DecoderBatch & batch,
                          const GraphOptions & opt, const CrossCache * cross = nullptr) const;
    // Adds to `graph` the copies of every layer's K'/V' of enc [n_embd_cross, n_cross] into `cross`
    // (compute it once per input).
    void cross_kv(ggml_context * ctx, ggml_cgraph * graph, ggml_tensor * enc, const CrossCache & cross) const;

private:
    ggml_tensor * norm(ggml_context * ctx, ggml_tensor * x, const DecoderNorm & n) const;
    // mask null: unmasked (cross-attention)
    ggml_tensor * attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v,
                            ggml_tensor * mask, const GraphOptions & opt) const;

    CausalDecoderHParams hp_;
    std::vector<DecoderLayer> layers_;
    DecoderNorm final_norm_;
};

}  // namespace ov
