#include "models/sopro/semantic_lm.h"

#include <cmath>
#include <string>

#include "runtime/errors.h"

namespace ov {

static const char * const kArch = "sopro-tts";
// sopro.nn.layers.RMSNorm's default: every norm of the LM (no config field holds it).
constexpr float kRmsEps = 1e-6f;
// rotary_cos_sin's base (not in the config either).
constexpr float kRopeBase = 10000.0f;
// Graphs a session keeps: step graphs (one per KV bucket) and the latest prefix shapes; past this
// the prefix graphs are dropped (each request's prefix length differs).
constexpr size_t kMaxGraphs = 16;
// Nodes of one graph: about 40 per decoder layer plus the embeddings, style prefix and head.
constexpr size_t kNodesPerLayer = 48;
constexpr size_t kNodesFixed = 96;

SemanticLMHParams SemanticLMHParams::load(const GGUFFile & f) {
    const auto key = [](const char * name) { return join_name(kArch, "model", name); };
    SemanticLMHParams hp;
    CausalDecoderHParams & d = hp.decoder;
    d.n_layer = f.get_count(key("ar_blocks"));
    d.n_embd = f.get_u32(key("ar_model_dim"));
    d.n_head = f.get_u32(key("ar_heads"));
    d.n_head_kv = f.get_u32(key("ar_kv_heads"));
    d.n_ff = f.get_u32(key("ar_ffn_length"));
    if (d.n_head <= 0 || d.n_embd % d.n_head != 0) {
        throw ModelFormatError(f.path() + ": ar_model_dim must be a multiple of ar_heads");
    }
    d.head_dim = d.n_embd / d.n_head;
    d.norm = CausalDecoderHParams::Norm::rms;
    d.norm_eps = kRmsEps;
    d.qk_norm = f.get_bool(key("ar_qk_rms_norm"));
    d.rope = CausalDecoderHParams::Rope::neox;
    d.rope_base = kRopeBase;
    d.ffn = CausalDecoderHParams::Ffn::swiglu;
    d.final_norm = true;
    d.check(f.path());
    hp.latent_dim = f.get_u32(key("latent_dim"));
    hp.text_vocab = f.get_u32(key("text_vocab_size"));
    hp.semantic_vocab = f.get_u32(key("semantic_vocab_size"));
    hp.n_style = f.get_u32(key("style_prefix_tokens"));
    hp.max_text_len = f.get_u32(key("max_text_len"));
    if (hp.latent_dim <= 0 || hp.text_vocab <= 0 || hp.semantic_vocab <= 0 || hp.n_style <= 0 || hp.max_text_len <= 0) {
        throw ModelFormatError(f.path() + ": zero-sized LM hyper-parameter");
    }
    return hp;
}

SemanticLM::SemanticLM(std::shared_ptr<GGUFFile> file, BackendPtr backend)
    : file_(std::move(file)), backend_(std::move(backend)) {
    GGUFFile & f = *file_;
    if (f.arch() != kArch) throw ModelFormatError(f.path() + ": not a sopro-tts file (arch " + f.arch() + ")");
    hp_ = SemanticLMHParams::load(f);
    const int64_t d = hp_.decoder.n_embd;
    // Projections: the converter's F32, F16 or Q8_0 (docs/gguf-layout.md); tables any of those.
    const std::vector<ggml_type> types = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0};
    const bool packed = backend_->is_cpu() && !backend_->stock_ops();
    const auto vec = [&](const std::string & name, int64_t n) { return f.tensor(name, {n}, {GGML_TYPE_F32}); };

    text_tok_emb_ = f.tensor("model.text_tok_emb.weight", {d, hp_.text_vocab}, types);
    semantic_tok_emb_ = f.tensor("model.semantic_tok_emb.weight", {hp_.latent_dim, hp_.n_logits()}, types);
    sem_in_proj_.load(f, "model.sem_in_proj", hp_.latent_dim, d, true, types, packed);
    queries_ = f.tensor("model.style_prefix.queries", {d, hp_.n_style}, {GGML_TYPE_F32});
    kv_norm_ = vec("model.style_prefix.kv_norm.weight", d);
    style_q_.load(f, "model.style_prefix.q_proj", d, d, false, types, packed);
    style_k_.load(f, "model.style_prefix.k_proj", d, d, false, types, packed);
    style_v_.load(f, "model.style_prefix.v_proj", d, d, false, types, packed);
    style_o_.load(f, "model.style_prefix.out_proj", d, d, false, types, packed);
    style_out_norm_ = vec("model.style_prefix.out_norm.weight", d);

    CausalDecoderNames names;
    names.layers = "model.ar_prior.temporal.layers";
    names.attn_norm = "attn_norm";
    names.q = "attn.q_proj";
    names.k = "attn.k_proj";
    names.v = "attn.v_proj";
    names.o = "attn.out_proj";  // attn_scale folded in
    names.q_norm = "attn.q_norm";
    names.k_norm = "attn.k_norm";
    names.ffn_norm = "ffn_norm";
    names.ffn_gate = "ffn.gate_proj";
    names.ffn_up = "ffn.up_proj";
    names.ffn_down = "ffn.down_proj";  // ffn_scale folded in
    names.final_norm = "model.ar_prior.out_norm";
    decoder_.load(f, names, hp_.decoder, types, packed);
    token_head_.load(f, "model.ar_prior.token_head", d, hp_.n_logits(), true, types, packed);
}

ggml_tensor * SemanticLM::embed_semantic(ggml_context * ctx, ggml_tensor * ids) const {
    return sem_in_proj_.forward(ctx, ggml_get_rows(ctx, semantic_tok_emb_, ids));
}

ggml_tensor * SemanticLM::text_embedding(ggml_context * ctx, ggml_tensor * ids) const {
    return ggml_get_rows(ctx, text_tok_emb_, ids);
}

// StylePrefixEncoder: out_norm(queries + out_proj(attn(q_proj(queries), k_proj(kv), v_proj(kv))))
// with kv = kv_norm(embed_semantic(style)); softmax over the style tokens, unmasked.
ggml_tensor * SemanticLM::style_prefix(ggml_context * ctx, ggml_tensor * ids, const GraphOptions & opt) const {
    const auto rms = [&](ggml_tensor * x, ggml_tensor * w) { return ggml_mul(ctx, ggml_rms_norm(ctx, x, kRmsEps), w); };
    if (!ids) return rms(queries_, style_out_norm_);
    const CausalDecoderHParams & d = hp_.decoder;
    const int64_t n = ids->ne[0];
    ggml_tensor * kv = rms(embed_semantic(ctx, ids), kv_norm_);  // [n_embd, n]
    // [hd, len, n_head] for attention()
    const auto heads = [&](ggml_tensor * x, int64_t len) {
        return ggml_permute(ctx, ggml_reshape_3d(ctx, x, d.head_dim, d.n_head, len), 0, 2, 1, 3);
    };
    ggml_tensor * q = heads(style_q_.forward(ctx, queries_), hp_.n_style);
    ggml_tensor * k = heads(style_k_.forward(ctx, kv), n);
    ggml_tensor * v = heads(style_v_.forward(ctx, kv), n);
    ggml_tensor * y = attention(ctx, q, k, v, 1.0f / std::sqrt((float) d.head_dim), opt);  // [hd, n_head, n_style]
    y = style_o_.forward(ctx, ggml_reshape_2d(ctx, ggml_cont(ctx, y), d.n_embd, hp_.n_style));
    ggml_tensor * out = rms(ggml_add(ctx, y, queries_), style_out_norm_);
    ggml_set_name(out, "style_prefix");
    return out;
}

SemanticLMSession::SemanticLMSession(std::shared_ptr<const SemanticLM> lm, int64_t n_ctx)
    : lm_(std::move(lm)), cache_(lm_->hparams().decoder, n_ctx, *lm_->backend()) {
    opt_.stock_ops = lm_->backend()->stock_ops();
}

void SemanticLMSession::Graph::free() {
    if (allocr) ggml_gallocr_free(allocr);
    if (ctx) ggml_free(ctx);
}

SemanticLMSession::~SemanticLMSession() {
    for (auto & [key, g] : graphs_) g.free();
}

// kPrefill: [style | text | sem] -> decoder -> logits of the last position.
// kStep: sem -> decoder -> logits of every position. kPrefix: the embeddings [style | text | sem].
SemanticLMSession::Graph & SemanticLMSession::graph(Kind kind, int64_t n_text, int64_t n_style, int64_t n_sem,
                                                    int64_t n_kv) {
    const Key key{kind, n_text, n_style, n_sem, n_kv};
    if (auto it = graphs_.find(key); it != graphs_.end()) return it->second;
    if (graphs_.size() >= kMaxGraphs) {
        for (auto it = graphs_.begin(); it != graphs_.end();) {
            if (std::get<0>(it->first) == kStep) {
                ++it;
                continue;
            }
            it->second.free();
            it = graphs_.erase(it);
        }
    }
    const SemanticLM & lm = *lm_;
    const size_t n_nodes = kNodesFixed + kNodesPerLayer * lm.hparams().decoder.n_layer;
    ggml_init_params params = {ggml_tensor_overhead() * n_nodes + ggml_graph_overhead_custom(n_nodes, false), nullptr,
                               /*no_alloc =*/true};
    Graph g;
    g.ctx = ggml_init(params);
    if (!g.ctx) throw std::runtime_error("ggml: cannot create an LM graph context");
    ggml_context * ctx = g.ctx;
    const auto input = [&](int64_t n, const char * name) {
        ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n);
        ggml_set_name(t, name);
        ggml_set_input(t);
        return t;
    };
    ggml_tensor * x = nullptr;
    if (kind != kStep) {
        g.style = n_style > 0 ? input(n_style, "inp.style") : nullptr;
        g.text = input(n_text, "inp.text");
        x = ggml_concat(ctx, lm.style_prefix(ctx, g.style, opt_), lm.text_embedding(ctx, g.text), 1);
    }
    g.sem = input(n_sem, "inp.sem");
    ggml_tensor * sem = lm.embed_semantic(ctx, g.sem);
    x = x ? ggml_concat(ctx, x, sem, 1) : sem;  // [n_embd, n_tokens]
    if (kind == kPrefix) {
        g.out = x;
    } else {
        g.batch = lm.decoder().batch(ctx, x->ne[1], n_kv);
        ggml_tensor * h = lm.decoder().forward(ctx, x, cache_, g.batch, opt_);
        if (kind == kPrefill) h = ggml_view_1d(ctx, h, h->ne[0], (h->ne[1] - 1) * h->nb[1]);
        g.out = lm.head(ctx, h);
    }
    ggml_set_name(g.out, "out");
    ggml_set_output(g.out);
    g.graph = ggml_new_graph_custom(ctx, n_nodes, false);
    ggml_build_forward_expand(g.graph, g.out);
    ggml_backend_t backend = lm.backend()->get();
    for (int i = 0; i < ggml_graph_n_nodes(g.graph); ++i) {
        ggml_tensor * node = ggml_graph_node(g.graph, i);
        if (!ggml_backend_supports_op(backend, node)) {
            g.free();
            throw std::runtime_error(std::string("ggml backend ") + ggml_backend_name(backend) + " cannot run " +
                                     ggml_op_desc(node) + " (" + ggml_get_name(node) + ")");
        }
    }
    // A compute buffer per graph: the tensors of a graph keep their addresses between runs, which
    // one allocator shared by several graphs would not guarantee once it grows.
    g.allocr = ggml_gallocr_new(ggml_backend_get_default_buffer_type(backend));
    if (!g.allocr || !ggml_gallocr_alloc_graph(g.allocr, g.graph)) {
        g.free();
        throw std::runtime_error("ggml: cannot allocate an LM graph");
    }
    return graphs_.emplace(key, g).first->second;
}

void SemanticLMSession::check_ids(const std::vector<int32_t> & ids, int64_t limit, const char * what) const {
    for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0 || ids[i] >= limit) {
            throw InvalidInput(std::string(what) + "[" + std::to_string(i) + "] = " + std::to_string(ids[i]) +
                               " is outside [0, " + std::to_string(limit) + ")");
        }
    }
}

std::vector<float> SemanticLMSession::run(Graph & g, const std::vector<int32_t> & text,
                                          const std::vector<int32_t> & style, const std::vector<int32_t> & sem,
                                          int64_t start) {
    // Every input on every run: the allocator may have reused an input's memory after its last use.
    if (g.text) ggml_backend_tensor_set(g.text, text.data(), 0, ggml_nbytes(g.text));
    if (g.style) ggml_backend_tensor_set(g.style, style.data(), 0, ggml_nbytes(g.style));
    ggml_backend_tensor_set(g.sem, sem.data(), 0, ggml_nbytes(g.sem));
    if (g.batch.mask) g.batch.set(start);
    lm_->backend()->compute(g.graph);
    std::vector<float> out(ggml_nelements(g.out));
    ggml_backend_tensor_get(g.out, out.data(), 0, ggml_nbytes(g.out));
    return out;
}

// The semantic ids after the text: the prompt, then BOS.
static std::vector<int32_t> with_bos(const std::vector<int32_t> & prompt, int64_t bos) {
    std::vector<int32_t> sem(prompt);
    sem.push_back((int32_t) bos);
    return sem;
}

std::vector<float> SemanticLMSession::prefill(const std::vector<int32_t> & text, const std::vector<int32_t> & style,
                                              const std::vector<int32_t> & prompt) {
    const SemanticLMHParams & hp = lm_->hparams();
    if (text.empty() || (int64_t) text.size() > hp.max_text_len) {
        throw InvalidInput("text ids: " + std::to_string(text.size()) + " given, 1 to " +
                           std::to_string(hp.max_text_len) + " allowed");
    }
    check_ids(text, hp.text_vocab, "text ids");
    check_ids(style, hp.semantic_vocab, "style tokens");
    check_ids(prompt, hp.semantic_vocab, "prompt tokens");
    const int64_t n = hp.n_style + (int64_t) text.size() + (int64_t) prompt.size() + 1;
    if (n > cache_.n_ctx()) {
        throw InvalidInput("the prefix has " + std::to_string(n) + " positions; this session holds " +
                           std::to_string(cache_.n_ctx()));
    }
    length_ = 0;
    Graph & g = graph(kPrefill, (int64_t) text.size(), (int64_t) style.size(), (int64_t) prompt.size() + 1,
                      CausalDecoder::bucket(n));
    std::vector<float> logits = run(g, text, style, with_bos(prompt, hp.bos()), 0);
    length_ = n;
    return logits;
}

std::vector<float> SemanticLMSession::step(const std::vector<int32_t> & tokens) {
    const SemanticLMHParams & hp = lm_->hparams();
    if (length_ == 0) throw InvalidInput("step() before prefill()");
    if (tokens.empty()) throw InvalidInput("step() needs at least one token");
    check_ids(tokens, hp.semantic_vocab, "tokens");
    const int64_t end = length_ + (int64_t) tokens.size();
    if (end > cache_.n_ctx()) {
        throw InvalidInput("the session holds " + std::to_string(cache_.n_ctx()) + " positions; " +
                           std::to_string(end) + " needed");
    }
    Graph & g = graph(kStep, 0, 0, (int64_t) tokens.size(), std::min(cache_.n_ctx(), CausalDecoder::bucket(end)));
    std::vector<float> logits = run(g, {}, {}, tokens, length_);
    length_ = end;
    return logits;
}

std::vector<float> SemanticLMSession::prefix(const std::vector<int32_t> & text, const std::vector<int32_t> & style,
                                             const std::vector<int32_t> & prompt) {
    const SemanticLMHParams & hp = lm_->hparams();
    if (text.empty()) throw InvalidInput("text ids: at least one needed");
    check_ids(text, hp.text_vocab, "text ids");
    check_ids(style, hp.semantic_vocab, "style tokens");
    check_ids(prompt, hp.semantic_vocab, "prompt tokens");
    Graph & g = graph(kPrefix, (int64_t) text.size(), (int64_t) style.size(), (int64_t) prompt.size() + 1, 0);
    return run(g, text, style, with_bos(prompt, hp.bos()), 0);
}

}  // namespace ov
