#include "models/omnivoice/lm/qwen3.h"

#include <cmath>
#include <string>

#include "attention.h"
#include "linear.h"
#include "maskgit_score.h"
#include "runtime/errors.h"

namespace ov {

static const char * const kArch = "omnivoice-lm";
// Derived tensors per decoder layer at most: the 2 joined groups of the mul_mat path.
constexpr size_t kJoinedPerLayer = 2;

// Weights of `parts` joined end to end, or null when they run packed or differ in type: ggml
// converts a mul_mat's F32 input to the weight's dot type on every call, and bigger GEMMs run
// closer to peak. Packed Linears stack their outputs in one ov_linear instead, without a copy.
static ggml_tensor * join_projections(DerivedWeights & derived, const std::vector<const Linear *> & parts) {
    std::vector<ggml_tensor *> weights;
    for (const Linear * l : parts) {
        if (l->packed || l->weight->type != parts[0]->weight->type) return nullptr;
        weights.push_back(l->weight);
    }
    return derived.concat(weights);
}

// x times the weights of `parts` with their outputs stacked ([sum OUT, N]): one ov_linear when
// they run packed, one mul_mat on their join, else null (each Linear runs on its own).
static ggml_tensor * stacked_projection(ggml_context * ctx, const std::vector<const Linear *> & parts,
                                        ggml_tensor * joined, ggml_tensor * x) {
    int64_t n_out = 0;
    std::vector<ggml_tensor *> weights;
    for (const Linear * l : parts) {
        n_out += l->weight->ne[1];
        weights.push_back(l->weight);
    }
    if (parts[0]->packed) return ov_linear(ctx, x, weights);
    if (joined) return ggml_mul_mat(ctx, ggml_reshape_2d(ctx, joined, x->ne[0], n_out), x);
    return nullptr;
}

Qwen3HParams Qwen3HParams::load(const GGUFFile & f) {
    const auto key = [](const char * name) { return join_name(kArch, name); };
    Qwen3HParams hp;
    hp.n_layer = f.get_count(key("block_count"));
    hp.n_embd = f.get_u32(key("embedding_length"));
    hp.n_ff = f.get_u32(key("feed_forward_length"));
    hp.n_head = f.get_u32(key("attention.head_count"));
    hp.n_head_kv = f.get_u32(key("attention.head_count_kv"));
    hp.n_embd_head = f.get_u32(key("attention.key_length"));
    hp.n_vocab = f.get_u32(key("vocab_size"));
    hp.n_ctx_train = f.get_u32(key("context_length"));
    hp.rms_eps = f.get_f32(key("attention.layer_norm_rms_epsilon"));
    hp.rope_freq_base = f.get_f32(key("rope.freq_base"));
    hp.n_codebook = f.get_count("omnivoice.num_audio_codebook");
    hp.audio_vocab = f.get_u32("omnivoice.audio_vocab_size");
    hp.audio_mask_id = f.get_u32("omnivoice.audio_mask_id");
    // omnivoice.cpp stores these weights as an INT32 array ([8, 8, 6, 6, 4, 4, 2, 2]), ours as FLOAT32.
    hp.audio_codebook_weights = f.get_number_array("omnivoice.audio_codebook_weights");

    const auto bad = [&](const std::string & what) { throw ModelFormatError(f.path() + ": " + what); };
    if (f.get_u32(key("attention.value_length")) != hp.n_embd_head) bad("value_length differs from key_length");
    if (hp.n_layer <= 0 || hp.n_embd <= 0 || hp.n_ff <= 0 || hp.n_embd_head <= 0 || hp.n_ctx_train <= 0) {
        bad("zero-sized hyper-parameter");
    }
    if (hp.n_head <= 0 || hp.n_head_kv <= 0 || hp.n_head % hp.n_head_kv != 0) {
        bad("head_count must be a positive multiple of head_count_kv");
    }
    if (hp.n_embd_head % 2 != 0) bad("key_length must be even for RoPE");
    if (hp.n_codebook <= 0 || hp.audio_vocab <= 0 || hp.audio_mask_id >= hp.audio_vocab) {
        bad("audio codebook metadata out of range");
    }
    if ((int64_t) hp.audio_codebook_weights.size() != hp.n_codebook) {
        bad("audio_codebook_weights needs one weight per codebook");
    }
    if (!(hp.rms_eps > 0.0f) || !(hp.rope_freq_base > 0.0f)) bad("rms epsilon and rope base must be positive");
    return hp;
}

Qwen3Model::Qwen3Model(const std::string & path, BackendPtr backend) : backend_(std::move(backend)) {
    file_ = std::make_unique<GGUFFile>(path, kArch, *backend_);
    GGUFFile & f = *file_;
    hp_ = Qwen3HParams::load(f);

    // 2-D weights in any storage type the CPU matmul and get_rows handle (the K-quants of
    // llama.cpp-style mixes such as omnivoice.cpp's Q4_K_M, and the 32-wide types those mixes fall
    // back to for rows that are not a multiple of 256); norms stay F32.
    const std::vector<ggml_type> mat_types = {
        GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1,
        GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K,
        GGML_TYPE_Q6_K};
    const auto mat = [&](const std::string & name, int64_t ne0, int64_t ne1) {
        return f.tensor(name, {ne0, ne1}, mat_types);
    };
    const auto vec = [&](const std::string & name, int64_t ne0) { return f.tensor(name, {ne0}, {GGML_TYPE_F32}); };
    // ov_linear is a CPU custom op: projections take it on a CPU backend only, and not on the
    // stock-op path.
    const bool cpu = backend_->is_cpu() && !backend_->stock_ops();
    derived_ = std::make_unique<DerivedWeights>(kJoinedPerLayer * hp_.n_layer, backend_->stock_ops());
    const auto linear = [&](Linear & l, const std::string & prefix, int64_t n_in, int64_t n_out) {
        l.load(f, prefix, n_in, n_out, /*has_bias =*/false, mat_types, cpu);
    };

    const int64_t n_embd = hp_.n_embd;
    const int64_t n_q = hp_.n_head * hp_.n_embd_head;
    const int64_t n_kv = hp_.n_head_kv * hp_.n_embd_head;
    const int64_t n_audio = hp_.n_codebook * hp_.audio_vocab;

    w_.embed_tokens = mat("llm.embed_tokens.weight", n_embd, hp_.n_vocab);
    w_.layers.resize(hp_.n_layer);
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
        const std::string p = join_name("llm", "layers", il);
        Qwen3Layer & l = w_.layers[il];
        l.attn_norm = vec(join_name(p, "input_layernorm", "weight"), n_embd);
        linear(l.wq, join_name(p, "self_attn", "q_proj"), n_embd, n_q);
        linear(l.wk, join_name(p, "self_attn", "k_proj"), n_embd, n_kv);
        linear(l.wv, join_name(p, "self_attn", "v_proj"), n_embd, n_kv);
        linear(l.wo, join_name(p, "self_attn", "o_proj"), n_q, n_embd);
        l.q_norm = vec(join_name(p, "self_attn", "q_norm", "weight"), hp_.n_embd_head);
        l.k_norm = vec(join_name(p, "self_attn", "k_norm", "weight"), hp_.n_embd_head);
        l.ffn_norm = vec(join_name(p, "post_attention_layernorm", "weight"), n_embd);
        linear(l.ffn_gate, join_name(p, "mlp", "gate_proj"), n_embd, hp_.n_ff);
        linear(l.ffn_up, join_name(p, "mlp", "up_proj"), n_embd, hp_.n_ff);
        linear(l.ffn_down, join_name(p, "mlp", "down_proj"), hp_.n_ff, n_embd);
        l.wqkv = join_projections(*derived_, {&l.wq, &l.wk, &l.wv});
        l.ffn_gate_up = join_projections(*derived_, {&l.ffn_gate, &l.ffn_up});
    }
    w_.norm = vec("llm.norm.weight", n_embd);
    w_.audio_embeddings = mat("audio_embeddings.weight", n_embd, n_audio);
    linear(w_.audio_heads, "audio_heads", n_embd, n_audio);
    f.check_all_consumed();
    derived_->materialize(*backend_);
}

Qwen3Session::Qwen3Session(std::shared_ptr<const Qwen3Model> model, std::vector<PackedSegment> segments,
                           std::optional<float> guidance_scale)
    : model_(std::move(model)), segments_(std::move(segments)) {
    const Qwen3HParams & hp = model_->hparams();
    if (segments_.empty()) throw InvalidInput("a session needs at least one segment");
    for (size_t i = 0; i < segments_.size(); ++i) {
        const PackedSegment & s = segments_[i];
        const std::string at = "segment " + std::to_string(i) + ": ";
        if (s.length <= 0) throw InvalidInput(at + "length must be positive");
        if (s.length > hp.n_ctx_train) {
            throw InvalidInput(at + "length " + std::to_string(s.length) + " exceeds the model's context length " +
                               std::to_string(hp.n_ctx_train));
        }
        if (s.target_len <= 0 || s.target_start < 0 || s.target_start + s.target_len > s.length) {
            throw InvalidInput(at + "target window [" + std::to_string(s.target_start) + ", " +
                               std::to_string(s.target_start + s.target_len) + ") must be non-empty and inside [0, " +
                               std::to_string(s.length) + ")");
        }
        n_tokens_ += s.length;
        n_target_ += s.target_len;
        attn_params_.segments.push_back(s.length);
    }
    attn_params_.scale = 1.0f / std::sqrt((float) hp.n_embd_head);
    const bool guided = guidance_scale && *guidance_scale != 0.0f;
    if (guidance_scale && !std::isfinite(*guidance_scale)) throw InvalidInput("guidance_scale must be finite");
    if (guided) {
        if (segments_.size() % 2 != 0) throw InvalidInput("guided scoring needs (cond, uncond) segment pairs");
        for (size_t i = 0; i < segments_.size(); i += 2) {
            if (segments_[i].target_len != segments_[i + 1].target_len) {
                throw InvalidInput("segments " + std::to_string(i) + " and " + std::to_string(i + 1) +
                                   " (cond, uncond) differ in target length");
            }
        }
    }

    // Host inputs that stay fixed for the session: positions restart per segment, and the rows
    // whose logits are wanted.
    pos_host_.reserve(n_tokens_);
    target_rows_host_.reserve(n_target_);
    int64_t start = 0;
    for (const PackedSegment & s : segments_) {
        for (int64_t i = 0; i < s.length; ++i) pos_host_.push_back((int32_t) i);
        for (int64_t i = 0; i < s.target_len; ++i) target_rows_host_.push_back((int32_t) (start + s.target_start + i));
        start += s.length;
    }
    // Logits columns of the cond (and uncond) targets, item by item.
    for (size_t i = 0, col = 0; guidance_scale && i < segments_.size(); ++i) {
        std::vector<int32_t> & rows = guided && i % 2 == 1 ? uncond_rows_host_ : cond_rows_host_;
        for (int64_t t = 0; t < segments_[i].target_len; ++t) rows.push_back((int32_t) col++);
    }
    n_cells_ = (int64_t) cond_rows_host_.size() * hp.n_codebook;
    text_ids_host_.resize(n_tokens_);
    audio_ids_host_.resize(n_tokens_ * hp.n_codebook);
    text_keep_host_.resize(n_tokens_);
    audio_keep_host_.resize(n_tokens_);

    // Node budget: a fixed set per layer plus the per-segment attention ops.
    const size_t n_nodes = 128 + hp.n_codebook * 2 + hp.n_layer * (64 + 16 * segments_.size());
    ggml_init_params params = {
        /*mem_size   =*/ggml_tensor_overhead() * n_nodes + ggml_graph_overhead_custom(n_nodes, false),
        /*mem_buffer =*/nullptr,
        /*no_alloc   =*/true,
    };
    ctx_ = ggml_init(params);
    if (!ctx_) throw std::runtime_error("ggml: cannot create the graph context");
    graph_ = ggml_new_graph_custom(ctx_, n_nodes, false);
    build_graph();
    if (guidance_scale) build_scoring(*guidance_scale);

    ggml_backend_t backend = model_->backend()->get();
    for (int i = 0; i < ggml_graph_n_nodes(graph_); ++i) {
        ggml_tensor * node = ggml_graph_node(graph_, i);
        if (!ggml_backend_supports_op(backend, node)) {
            throw std::runtime_error(std::string("ggml backend ") + ggml_backend_name(backend) + " cannot run " +
                                     ggml_op_desc(node) + " (" + ggml_get_name(node) + ") with these types");
        }
    }
    allocr_ = ggml_gallocr_new(ggml_backend_get_default_buffer_type(backend));
    if (!allocr_ || !ggml_gallocr_alloc_graph(allocr_, graph_)) {
        throw std::runtime_error("ggml: cannot allocate the compute buffer of the LM graph");
    }
}

Qwen3Session::~Qwen3Session() {
    if (allocr_) ggml_gallocr_free(allocr_);
    if (ctx_) ggml_free(ctx_);
}

// Attention of every packed segment with itself only: upstream's block-diagonal mask without
// computing the masked blocks. On the CPU our op ov_attention (blocked GEMM tiles, all segments and
// heads in one op; see ggml/attention.cpp for its measurements); the stock-op path runs
// packed_attention's per-segment mul_mat + soft_max_ext.
// q: [hd, n_head, n_tokens], k/v: [hd, n_head_kv, n_tokens] -> [hd, n_head, n_tokens]
ggml_tensor * Qwen3Session::build_attention(ggml_tensor * q, ggml_tensor * k, ggml_tensor * v) {
    GraphOptions opt;
    opt.stock_ops = model_->backend()->stock_ops();
    if (!opt.stock_ops) return ov_attention(ctx_, q, k, v, &attn_params_);
    return packed_attention(ctx_, q, k, v, attn_params_.segments, attn_params_.scale, opt);
}

// OmniVoice.forward (logits of the target rows only):
//   _prepare_embed_inputs -> llm (Qwen3Model, bidirectional) -> audio_heads
void Qwen3Session::build_graph() {
    const Qwen3HParams & hp = model_->hparams();
    const Qwen3Weights & w = model_->weights();
    const int64_t n_tokens = n_tokens_;
    const int64_t hd = hp.n_embd_head;
    const int64_t n_q = hp.n_head * hd;
    const int64_t n_kv = hp.n_head_kv * hd;

    text_ids_ = ggml_new_tensor_1d(ctx_, GGML_TYPE_I32, n_tokens);
    ggml_set_name(text_ids_, "inp.text_ids");
    ggml_set_input(text_ids_);
    audio_ids_ = ggml_new_tensor_2d(ctx_, GGML_TYPE_I32, n_tokens, hp.n_codebook);
    ggml_set_name(audio_ids_, "inp.audio_ids");
    ggml_set_input(audio_ids_);
    text_keep_ = ggml_new_tensor_2d(ctx_, GGML_TYPE_F32, 1, n_tokens);
    ggml_set_name(text_keep_, "inp.text_keep");
    ggml_set_input(text_keep_);
    audio_keep_ = ggml_new_tensor_2d(ctx_, GGML_TYPE_F32, 1, n_tokens);
    ggml_set_name(audio_keep_, "inp.audio_keep");
    ggml_set_input(audio_keep_);
    pos_ = ggml_new_tensor_1d(ctx_, GGML_TYPE_I32, n_tokens);
    ggml_set_name(pos_, "inp.pos");
    ggml_set_input(pos_);
    target_rows_ = ggml_new_tensor_1d(ctx_, GGML_TYPE_I32, n_target_);
    ggml_set_name(target_rows_, "inp.target_rows");
    ggml_set_input(target_rows_);

    // _prepare_embed_inputs: text rows from embed_tokens, audio rows the sum over codebooks of
    // audio_embeddings[id_k + k*audio_vocab]. The host already sent every position to one table
    // only (the other gets a harmless index), so the keep masks select exactly one of the two.
    ggml_tensor * text_emb = ggml_get_rows(ctx_, w.embed_tokens, text_ids_);  // [n_embd, n_tokens]
    ggml_set_name(text_emb, "embd.text");
    ggml_tensor * audio_rows =
        ggml_get_rows(ctx_, w.audio_embeddings, ggml_reshape_1d(ctx_, audio_ids_, n_tokens * hp.n_codebook));
    ggml_set_name(audio_rows, "embd.audio_rows");  // [n_embd, n_tokens * n_codebook], codebook-major
    ggml_tensor * audio_emb = nullptr;             // [n_embd, n_tokens]
    for (int64_t cb = 0; cb < hp.n_codebook; ++cb) {
        ggml_tensor * rows = ggml_view_2d(ctx_, audio_rows, hp.n_embd, n_tokens, audio_rows->nb[1],
                                          cb * n_tokens * audio_rows->nb[1]);
        audio_emb = audio_emb ? ggml_add(ctx_, audio_emb, rows) : rows;
    }
    ggml_set_name(audio_emb, "embd.audio");
    ggml_tensor * inpL = ggml_add(ctx_, ggml_mul(ctx_, text_emb, text_keep_), ggml_mul(ctx_, audio_emb, audio_keep_));
    ggml_set_name(inpL, "embd");  // [n_embd, n_tokens]

    for (int il = 0; il < (int) hp.n_layer; ++il) {
        const Qwen3Layer & l = w.layers[il];
        ggml_tensor * cur = nullptr;

        // Qwen3Attention
        {
            cur = ggml_mul(ctx_, ggml_rms_norm(ctx_, inpL, hp.rms_eps), l.attn_norm);
            ggml_format_name(cur, "blk%d.attn_norm", il);

            ggml_tensor * q = nullptr;  // [hd, n_head, n_tokens]
            ggml_tensor * k = nullptr;  // [hd, n_head_kv, n_tokens]
            ggml_tensor * v = nullptr;  // [hd, n_head_kv, n_tokens]
            if (ggml_tensor * qkv = stacked_projection(ctx_, {&l.wq, &l.wk, &l.wv}, l.wqkv, cur)) {
                ggml_format_name(qkv, "blk%d.qkv", il);  // [n_q + 2*n_kv, n_tokens]: rows q, k, v
                const auto heads = [&](int64_t n_heads, int64_t first_row) {
                    return ggml_view_3d(ctx_, qkv, hd, n_heads, n_tokens, hd * qkv->nb[0], qkv->nb[1],
                                        first_row * qkv->nb[0]);
                };
                q = heads(hp.n_head, 0);
                k = heads(hp.n_head_kv, n_q);
                v = heads(hp.n_head_kv, n_q + n_kv);
            } else {
                q = ggml_reshape_3d(ctx_, l.wq.forward(ctx_, cur), hd, hp.n_head, n_tokens);
                k = ggml_reshape_3d(ctx_, l.wk.forward(ctx_, cur), hd, hp.n_head_kv, n_tokens);
                v = ggml_reshape_3d(ctx_, l.wv.forward(ctx_, cur), hd, hp.n_head_kv, n_tokens);
            }
            ggml_format_name(v, "blk%d.v", il);

            // Per-head RMSNorm before RoPE; NEOX rotation (rotate_half), plain RoPE without YaRN.
            q = ggml_mul(ctx_, ggml_rms_norm(ctx_, q, hp.rms_eps), l.q_norm);
            ggml_format_name(q, "blk%d.q_norm", il);
            k = ggml_mul(ctx_, ggml_rms_norm(ctx_, k, hp.rms_eps), l.k_norm);
            ggml_format_name(k, "blk%d.k_norm", il);
            q = ggml_rope_ext(ctx_, q, pos_, nullptr, (int) hd, GGML_ROPE_TYPE_NEOX, (int) hp.n_ctx_train,
                              hp.rope_freq_base, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
            ggml_format_name(q, "blk%d.q_rope", il);  // [hd, n_head, n_tokens]
            k = ggml_rope_ext(ctx_, k, pos_, nullptr, (int) hd, GGML_ROPE_TYPE_NEOX, (int) hp.n_ctx_train,
                              hp.rope_freq_base, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
            ggml_format_name(k, "blk%d.k_rope", il);  // [hd, n_head_kv, n_tokens]

            cur = build_attention(q, k, v);
            ggml_format_name(cur, "blk%d.kqv", il);  // [hd, n_head, n_tokens]
            cur = l.wo.forward(ctx_, ggml_reshape_2d(ctx_, cur, hd * hp.n_head, n_tokens));
            ggml_format_name(cur, "blk%d.attn_out", il);
        }
        ggml_tensor * ffn_inp = ggml_add(ctx_, cur, inpL);
        ggml_format_name(ffn_inp, "blk%d.ffn_inp", il);

        // Qwen3MLP: down(silu(gate(x)) * up(x))
        {
            cur = ggml_mul(ctx_, ggml_rms_norm(ctx_, ffn_inp, hp.rms_eps), l.ffn_norm);
            ggml_format_name(cur, "blk%d.ffn_norm", il);
            if (ggml_tensor * gate_up = stacked_projection(ctx_, {&l.ffn_gate, &l.ffn_up}, l.ffn_gate_up, cur)) {
                // [2*n_ff, n_tokens]: rows gate, then up, the halves ggml_swiglu reads
                ggml_format_name(gate_up, "blk%d.ffn_gate_up", il);
                cur = ggml_swiglu(ctx_, gate_up);
            } else {
                cur = ggml_swiglu_split(ctx_, l.ffn_gate.forward(ctx_, cur), l.ffn_up.forward(ctx_, cur));
            }
            ggml_format_name(cur, "blk%d.ffn_act", il);  // [n_ff, n_tokens]
            cur = l.ffn_down.forward(ctx_, cur);
            ggml_format_name(cur, "blk%d.ffn_out", il);
        }
        inpL = ggml_add(ctx_, cur, ffn_inp);
        ggml_format_name(inpL, "blk%d.out", il);  // [n_embd, n_tokens]
    }

    ggml_tensor * cur = ggml_mul(ctx_, ggml_rms_norm(ctx_, inpL, hp.rms_eps), w.norm);
    ggml_set_name(cur, "norm");

    // audio_heads on the target windows only: [n_embd, n_target] -> [n_codebook*audio_vocab, n_target]
    cur = ggml_get_rows(ctx_, cur, target_rows_);
    ggml_set_name(cur, "norm.target_rows");
    logits_ = w.audio_heads.forward(ctx_, cur);
    ggml_set_name(logits_, "logits");
    ggml_set_output(logits_);

    ggml_build_forward_expand(graph_, logits_);
}

// OmniVoice._predict_tokens_with_scoring with class_temperature 0, per cell (target frame,
// codebook): the max and argmax of the guided log-probabilities, mask id excluded. Upstream takes
// g = log_softmax(c' + s (c' - u')) of c' = log_softmax(c), u' = log_softmax(u); the
// normalisers of c' and u' are constants per cell, so g = log_softmax(b) with
// b = (1 + s) c - s u, and max g = max_{v != mask} b - logsumexp(b) = -log(sum(exp(b - m)))
// with m the max of b over the non-mask classes. One row max (a max pool: no stock reduction
// gives it) and one exp pass instead of three each: at 250 frames the step's scoring fell from
// the stock ops' ten passes over [V, cells] tensors. b - m is clamped at 80 before exp, which
// changes a score only if the mask class outweighs every other by e^80 (its cell scores ~ -80).
// On the CPU path ov_maskgit_score does the same per cell in one pass.
void Qwen3Session::build_scoring(float guidance_scale) {
    const Qwen3HParams & hp = model_->hparams();
    const int64_t n_vocab = hp.audio_vocab;
    const auto input = [&](ggml_type type, int64_t n, const char * name) {
        ggml_tensor * t = ggml_new_tensor_1d(ctx_, type, n);
        ggml_set_name(t, name);
        ggml_set_input(t);
        return t;
    };
    const auto cells = [&](ggml_tensor * rows) {  // the logits of those targets: [V, C * n_rows]
        return ggml_reshape_2d(ctx_, ggml_get_rows(ctx_, logits_, rows), n_vocab, rows->ne[0] * hp.n_codebook);
    };

    cond_rows_ = input(GGML_TYPE_I32, (int64_t) cond_rows_host_.size(), "inp.cond_rows");
    if (guidance_scale != 0.0f) {
        uncond_rows_ = input(GGML_TYPE_I32, (int64_t) uncond_rows_host_.size(), "inp.uncond_rows");
    }
    if (!model_->backend()->stock_ops()) {
        scores_ = ov_maskgit_score(ctx_, logits_, cond_rows_, uncond_rows_, (int) n_vocab, (int) hp.audio_mask_id,
                                   guidance_scale);
        ggml_set_name(scores_, "score.fused");  // [2, n_cells]: score, best class
        ggml_set_output(scores_);
        ggml_build_forward_expand(graph_, scores_);
        return;
    }
    class_mask_ = input(GGML_TYPE_F32, n_vocab, "inp.class_mask");
    class_mask_host_.assign(n_vocab, 0.0f);
    class_mask_host_[hp.audio_mask_id] = -INFINITY;
    ggml_tensor * b = cells(cond_rows_);  // [V, n_cells]
    if (guidance_scale != 0.0f) {
        b = ggml_sub(ctx_, ggml_scale(ctx_, b, 1.0f + guidance_scale), ggml_scale(ctx_, cells(uncond_rows_), guidance_scale));
    }
    ggml_set_name(b, "score.guided");
    ggml_tensor * masked = ggml_add(ctx_, b, class_mask_);
    ggml_tensor * max = ggml_pool_2d(ctx_, masked, GGML_OP_POOL_MAX, (int) n_vocab, 1, (int) n_vocab, 1, 0, 0);
    ggml_tensor * shifted = ggml_clamp(ctx_, ggml_sub(ctx_, b, max), -INFINITY, 80.0f);
    scores_ = ggml_neg(ctx_, ggml_log(ctx_, ggml_sum_rows(ctx_, ggml_exp(ctx_, shifted))));
    ggml_set_name(scores_, "score.max");  // [1, n_cells]
    ggml_set_output(scores_);
    best_ = ggml_argmax(ctx_, masked);
    ggml_set_name(best_, "score.argmax");  // [n_cells]
    ggml_set_output(best_);
    GGML_ASSERT(ggml_nelements(scores_) == n_cells_);
    ggml_build_forward_expand(graph_, scores_);
    ggml_build_forward_expand(graph_, best_);
}

void Qwen3Session::fill_inputs(const int32_t * ids, const bool * audio_mask) {
    const Qwen3HParams & hp = model_->hparams();
    const int64_t n = n_tokens_;
    for (int64_t t = 0; t < n; ++t) {
        if (audio_mask[t]) {
            for (int64_t cb = 0; cb < hp.n_codebook; ++cb) {
                const int32_t id = ids[cb * n + t];
                if (id < 0 || id >= hp.audio_vocab) {
                    throw InvalidInput("input_ids[" + std::to_string(cb) + ", " + std::to_string(t) + "] = " +
                                       std::to_string(id) + " at an audio position is outside [0, " +
                                       std::to_string(hp.audio_vocab) + ")");
                }
                audio_ids_host_[cb * n + t] = (int32_t) (id + cb * hp.audio_vocab);
            }
            text_ids_host_[t] = 0;  // looked up, then zeroed by text_keep
        } else {
            const int32_t id = ids[t];
            if (id < 0 || id >= hp.n_vocab) {
                throw InvalidInput("input_ids[0, " + std::to_string(t) + "] = " + std::to_string(id) +
                                   " at a text position is outside [0, " + std::to_string(hp.n_vocab) + ")");
            }
            text_ids_host_[t] = id;
            for (int64_t cb = 0; cb < hp.n_codebook; ++cb) audio_ids_host_[cb * n + t] = 0;  // zeroed by audio_keep
        }
        text_keep_host_[t] = audio_mask[t] ? 0.0f : 1.0f;
        audio_keep_host_[t] = audio_mask[t] ? 1.0f : 0.0f;
    }
}

void Qwen3Session::compute(const int32_t * ids, const bool * audio_mask) {
    fill_inputs(ids, audio_mask);
    ggml_backend_tensor_set(text_ids_, text_ids_host_.data(), 0, ggml_nbytes(text_ids_));
    ggml_backend_tensor_set(audio_ids_, audio_ids_host_.data(), 0, ggml_nbytes(audio_ids_));
    ggml_backend_tensor_set(text_keep_, text_keep_host_.data(), 0, ggml_nbytes(text_keep_));
    ggml_backend_tensor_set(audio_keep_, audio_keep_host_.data(), 0, ggml_nbytes(audio_keep_));
    ggml_backend_tensor_set(pos_, pos_host_.data(), 0, ggml_nbytes(pos_));
    ggml_backend_tensor_set(target_rows_, target_rows_host_.data(), 0, ggml_nbytes(target_rows_));
    if (scores_) {
        ggml_backend_tensor_set(cond_rows_, cond_rows_host_.data(), 0, ggml_nbytes(cond_rows_));
        if (uncond_rows_) ggml_backend_tensor_set(uncond_rows_, uncond_rows_host_.data(), 0, ggml_nbytes(uncond_rows_));
        if (class_mask_) ggml_backend_tensor_set(class_mask_, class_mask_host_.data(), 0, ggml_nbytes(class_mask_));
    }
    model_->backend()->compute(graph_);
}

void Qwen3Session::forward(const int32_t * ids, const bool * audio_mask, float * logits) {
    std::lock_guard<std::mutex> lock(model_->compute_mutex());
    compute(ids, audio_mask);
    ggml_backend_tensor_get(logits_, logits, 0, ggml_nbytes(logits_));
}

void Qwen3Session::score(const int32_t * ids, const bool * audio_mask, float * scores, int32_t * best) {
    if (!scores_) throw InvalidInput("this session was opened without a guidance scale: it has no scoring");
    std::lock_guard<std::mutex> lock(model_->compute_mutex());
    compute(ids, audio_mask);
    if (!best_) {  // ov_maskgit_score's pairs
        std::vector<float> pairs(2 * n_cells_);
        ggml_backend_tensor_get(scores_, pairs.data(), 0, ggml_nbytes(scores_));
        for (int64_t i = 0; i < n_cells_; ++i) {
            scores[i] = pairs[2 * i];
            best[i] = (int32_t) pairs[2 * i + 1];
        }
        return;
    }
    ggml_backend_tensor_get(scores_, scores, 0, ggml_nbytes(scores_));
    ggml_backend_tensor_get(best_, best, 0, ggml_nbytes(best_));
}

}  // namespace ov
