#include "nn/causal_decoder.h"

#include <cmath>
#include <stdexcept>

#include "runtime/errors.h"

namespace ov {

void CausalDecoderHParams::check(const std::string & where) const {
    const auto bad = [&](const std::string & what) { throw ModelFormatError(where + ": " + what); };
    if (n_layer <= 0 || n_embd <= 0 || n_ff <= 0 || head_dim <= 0) bad("zero-sized decoder hyper-parameter");
    if (n_head <= 0 || n_head_kv <= 0 || n_head % n_head_kv != 0) {
        bad("head count must be a positive multiple of the KV head count");
    }
    if (rope != Rope::none && head_dim % 2 != 0) bad("head dim must be even for RoPE");
    if (!(norm_eps > 0.0f) || (rope != Rope::none && !(rope_base > 0.0f))) bad("norm epsilon and RoPE base must be positive");
    if (cross_attention && n_embd_cross <= 0) bad("cross-attention needs the encoder width");
}

// K and V of n positions per layer, F32 [head_dim * n_head_kv, n], zeroed, in their own buffer.
static ggml_backend_buffer_t alloc_kv(const CausalDecoderHParams & hp, int64_t n, const Backend & backend,
                                      const char * what, ggml_context *& ctx, std::vector<ggml_tensor *> & k,
                                      std::vector<ggml_tensor *> & v) {
    ggml_init_params params = {2 * (size_t) hp.n_layer * ggml_tensor_overhead(), nullptr, /*no_alloc =*/true};
    ctx = ggml_init(params);
    if (!ctx) throw std::runtime_error(std::string("ggml: cannot create the ") + what + " context");
    for (int64_t il = 0; il < hp.n_layer; ++il) {
        k.push_back(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, hp.head_dim * hp.n_head_kv, n));
        ggml_format_name(k.back(), "%s.k%d", what, (int) il);
        v.push_back(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, hp.head_dim * hp.n_head_kv, n));
        ggml_format_name(v.back(), "%s.v%d", what, (int) il);
    }
    ggml_backend_buffer_t buffer = ggml_backend_alloc_ctx_tensors(ctx, backend.get());
    if (!buffer) throw std::runtime_error(std::string("ggml: cannot allocate the ") + what);
    // Masked rows still enter the stock path's products (0 * NaN would poison a row): zero them once.
    ggml_backend_buffer_clear(buffer, 0);
    return buffer;
}

KVCache::KVCache(const CausalDecoderHParams & hp, int64_t n_ctx, const Backend & backend)
    : n_ctx_(CausalDecoder::bucket(n_ctx)) {
    if (n_ctx <= 0) throw InvalidInput("a KV cache needs at least one position");
    buffer_ = alloc_kv(hp, n_ctx_, backend, "cache", ctx_, k_, v_);
}

KVCache::~KVCache() {
    if (buffer_) ggml_backend_buffer_free(buffer_);
    if (ctx_) ggml_free(ctx_);
}

CrossCache::CrossCache(const CausalDecoderHParams & hp, int64_t n_cross, const Backend & backend) : n_cross_(n_cross) {
    if (!hp.cross_attention) throw InvalidInput("this decoder has no cross-attention");
    if (n_cross <= 0) throw InvalidInput("cross-attention needs at least one encoder position");
    buffer_ = alloc_kv(hp, n_cross, backend, "cross", ctx_, k_, v_);
}

CrossCache::~CrossCache() {
    if (buffer_) ggml_backend_buffer_free(buffer_);
    if (ctx_) ggml_free(ctx_);
}

void DecoderBatch::set(int64_t start) const {
    if (start < 0 || start + n_tokens > n_kv) {
        throw InvalidInput("decoder positions [" + std::to_string(start) + ", " + std::to_string(start + n_tokens) +
                           ") do not fit the " + std::to_string(n_kv) + " positions of this graph");
    }
    std::vector<int32_t> p(n_tokens);
    std::vector<int64_t> r(n_tokens);
    std::vector<ggml_fp16_t> m(n_kv * n_tokens);
    const ggml_fp16_t zero = ggml_fp32_to_fp16(0.0f), ninf = ggml_fp32_to_fp16(-INFINITY);
    for (int64_t i = 0; i < n_tokens; ++i) {
        p[i] = (int32_t) (start + i);
        r[i] = start + i;
        for (int64_t j = 0; j < n_kv; ++j) m[i * n_kv + j] = j <= start + i ? zero : ninf;
    }
    if (pos) ggml_backend_tensor_set(pos, p.data(), 0, ggml_nbytes(pos));
    ggml_backend_tensor_set(rows, r.data(), 0, ggml_nbytes(rows));
    ggml_backend_tensor_set(mask, m.data(), 0, ggml_nbytes(mask));
}

void CausalDecoder::load(GGUFFile & f, const CausalDecoderNames & names, const CausalDecoderHParams & hp,
                         const std::vector<ggml_type> & types, bool allow_packed) {
    hp.check(f.path());
    hp_ = hp;
    const bool layer_norm = hp.norm == CausalDecoderHParams::Norm::layer;
    const auto load_norm = [&](const std::string & prefix, int64_t n) {
        DecoderNorm out;
        out.weight = f.tensor(join_name(prefix, "weight"), {n}, {GGML_TYPE_F32});
        if (layer_norm) out.bias = f.tensor(join_name(prefix, "bias"), {n}, {GGML_TYPE_F32});
        return out;
    };
    const int64_t n_q = hp.n_head * hp.head_dim, n_kv = hp.n_head_kv * hp.head_dim;
    layers_.resize(hp.n_layer);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
        DecoderLayer & l = layers_[il];
        const auto part = [&](const std::string & name) { return join_name(names.layers, il, name); };
        const auto linear = [&](Linear & lin, const std::string & name, int64_t n_in, int64_t n_out, bool bias) {
            lin.load(f, part(name), n_in, n_out, bias, types, allow_packed);
        };
        l.attn_norm = load_norm(part(names.attn_norm), hp.n_embd);
        linear(l.q, names.q, hp.n_embd, n_q, hp.bias_q);
        linear(l.k, names.k, hp.n_embd, n_kv, hp.bias_k);
        linear(l.v, names.v, hp.n_embd, n_kv, hp.bias_v);
        linear(l.o, names.o, n_q, hp.n_embd, hp.bias_o);
        if (hp.qk_norm) {
            l.q_norm = f.tensor(join_name(part(names.q_norm), "weight"), {hp.head_dim}, {GGML_TYPE_F32});
            l.k_norm = f.tensor(join_name(part(names.k_norm), "weight"), {hp.head_dim}, {GGML_TYPE_F32});
        }
        if (hp.cross_attention) {
            l.cross_norm = load_norm(part(names.cross_norm), hp.n_embd);
            linear(l.cross_q, names.cross_q, hp.n_embd, n_q, hp.bias_q);
            l.cross_k.load(f, part(names.cross_k), hp.n_embd_cross, n_kv, hp.bias_k, types, allow_packed);
            l.cross_v.load(f, part(names.cross_v), hp.n_embd_cross, n_kv, hp.bias_v, types, allow_packed);
            linear(l.cross_o, names.cross_o, n_q, hp.n_embd, hp.bias_o);
        }
        l.ffn_norm = load_norm(part(names.ffn_norm), hp.n_embd);
        if (hp.ffn == CausalDecoderHParams::Ffn::swiglu) linear(l.ffn_gate, names.ffn_gate, hp.n_embd, hp.n_ff, hp.bias_ffn);
        linear(l.ffn_up, names.ffn_up, hp.n_embd, hp.n_ff, hp.bias_ffn);
        linear(l.ffn_down, names.ffn_down, hp.n_ff, hp.n_embd, hp.bias_ffn);
    }
    if (hp.final_norm) final_norm_ = load_norm(names.final_norm, hp.n_embd);
}

DecoderBatch CausalDecoder::batch(ggml_context * ctx, int64_t n_tokens, int64_t n_kv) const {
    DecoderBatch b;
    b.n_tokens = n_tokens;
    b.n_kv = n_kv;
    if (hp_.rope != CausalDecoderHParams::Rope::none) {  // else nothing reads positions
        b.pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens);
        ggml_set_name(b.pos, "dec.pos");
        ggml_set_input(b.pos);
    }
    b.rows = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, n_tokens);
    ggml_set_name(b.rows, "dec.rows");
    ggml_set_input(b.rows);
    b.mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, n_kv, n_tokens);
    ggml_set_name(b.mask, "dec.mask");
    ggml_set_input(b.mask);
    return b;
}

ggml_tensor * CausalDecoder::norm(ggml_context * ctx, ggml_tensor * x, const DecoderNorm & n) const {
    if (hp_.norm == CausalDecoderHParams::Norm::rms) return ggml_mul(ctx, ggml_rms_norm(ctx, x, hp_.norm_eps), n.weight);
    return ggml_add(ctx, ggml_mul(ctx, ggml_norm(ctx, x, hp_.norm_eps), n.weight), n.bias);
}

// q: [hd, n_head, n_tokens]; k, v: [hd, n_kv, n_head_kv] views of the cache -> [hd, n_head, n_tokens]
ggml_tensor * CausalDecoder::attention(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v,
                                       ggml_tensor * mask, const GraphOptions & opt) const {
    const float scale = 1.0f / std::sqrt((float) hp_.head_dim);
    q = ggml_permute(ctx, q, 0, 2, 1, 3);  // [hd, n_tokens, n_head]
    if (!opt.stock_ops) {
        ggml_tensor * kqv = ggml_flash_attn_ext(ctx, q, k, v, mask, scale, 0.0f, 0.0f);
        ggml_flash_attn_ext_set_prec(kqv, GGML_PREC_F32);
        return kqv;
    }
    ggml_tensor * kq = ggml_mul_mat(ctx, k, q);  // [n_kv, n_tokens, n_head]; head h reads KV head h / (n_head / n_head_kv)
    kq = ggml_soft_max_ext(ctx, kq, mask, scale, 0.0f);
    ggml_tensor * vt = ggml_cont(ctx, ggml_transpose(ctx, v));  // [n_kv, hd, n_head_kv]
    ggml_tensor * kqv = ggml_mul_mat(ctx, vt, kq);               // [hd, n_tokens, n_head]
    return ggml_cont(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3));   // [hd, n_head, n_tokens]
}

void CausalDecoder::cross_kv(ggml_context * ctx, ggml_cgraph * graph, ggml_tensor * enc, const CrossCache & cross) const {
    if (enc->ne[0] != hp_.n_embd_cross || enc->ne[1] != cross.n_cross()) {
        throw InvalidInput("encoder states must be [" + std::to_string(hp_.n_embd_cross) + ", " +
                           std::to_string(cross.n_cross()) + "]");
    }
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
        const DecoderLayer & l = layers_[il];
        ggml_build_forward_expand(graph, ggml_cpy(ctx, l.cross_k.forward(ctx, enc), cross.k(il)));
        ggml_build_forward_expand(graph, ggml_cpy(ctx, l.cross_v.forward(ctx, enc), cross.v(il)));
    }
}

ggml_tensor * CausalDecoder::forward(ggml_context * ctx, ggml_tensor * x, const KVCache & cache, const DecoderBatch & b,
                                     const GraphOptions & opt, const CrossCache * cross) const {
    const CausalDecoderHParams & hp = hp_;
    const int64_t hd = hp.head_dim, n = b.n_tokens;
    if (hp.cross_attention && !cross) throw InvalidInput("this decoder's calls need its cross-attention cache");
    if (b.n_kv > cache.n_ctx()) {
        throw InvalidInput("a decoder call attending to " + std::to_string(b.n_kv) + " positions needs a KV cache " +
                           "that large; this one holds " + std::to_string(cache.n_ctx()));
    }
    // The cache's first n_kv positions as [hd, n_kv, n_head_kv] (rows are positions).
    const auto cached = [&](ggml_tensor * rows) {
        return ggml_permute(ctx, ggml_view_3d(ctx, rows, hd, hp.n_head_kv, b.n_kv, hd * ggml_element_size(rows),
                                              rows->nb[1], 0),
                            0, 2, 1, 3);
    };
    for (int64_t il = 0; il < hp.n_layer; ++il) {
        const DecoderLayer & l = layers_[il];
        ggml_tensor * cur = norm(ctx, x, l.attn_norm);
        ggml_tensor * q = ggml_reshape_3d(ctx, l.q.forward(ctx, cur), hd, hp.n_head, n);
        ggml_tensor * k = ggml_reshape_3d(ctx, l.k.forward(ctx, cur), hd, hp.n_head_kv, n);
        ggml_tensor * v = l.v.forward(ctx, cur);  // [hd * n_head_kv, n]
        if (l.q_norm) {
            q = ggml_mul(ctx, ggml_rms_norm(ctx, q, hp.norm_eps), l.q_norm);
            k = ggml_mul(ctx, ggml_rms_norm(ctx, k, hp.norm_eps), l.k_norm);
        }
        if (hp.rope == CausalDecoderHParams::Rope::neox) {
            q = ggml_rope_ext(ctx, q, b.pos, nullptr, (int) hd, GGML_ROPE_TYPE_NEOX, 0, hp.rope_base, 1.0f, 0.0f,
                              1.0f, 0.0f, 0.0f);
            k = ggml_rope_ext(ctx, k, b.pos, nullptr, (int) hd, GGML_ROPE_TYPE_NEOX, 0, hp.rope_base, 1.0f, 0.0f,
                              1.0f, 0.0f, 0.0f);
        }
        ggml_format_name(q, "dec%d.q", (int) il);
        // The new rows go into the cache; attention reads the cache through the set_rows results,
        // so the writes come first in the graph.
        ggml_tensor * k_all = ggml_set_rows(ctx, cache.k(il), ggml_reshape_2d(ctx, k, hd * hp.n_head_kv, n), b.rows);
        ggml_tensor * v_all = ggml_set_rows(ctx, cache.v(il), v, b.rows);
        cur = attention(ctx, q, cached(k_all), cached(v_all), b.mask, opt);  // [hd, n_head, n]
        ggml_format_name(cur, "dec%d.attn", (int) il);
        x = ggml_add(ctx, x, l.o.forward(ctx, ggml_reshape_2d(ctx, cur, hd * hp.n_head, n)));

        if (hp.cross_attention) {
            ggml_tensor * qx = ggml_reshape_3d(ctx, l.cross_q.forward(ctx, norm(ctx, x, l.cross_norm)), hd, hp.n_head, n);
            const auto all = [&](ggml_tensor * rows) {
                return ggml_permute(ctx, ggml_view_3d(ctx, rows, hd, hp.n_head_kv, cross->n_cross(),
                                                      hd * ggml_element_size(rows), rows->nb[1], 0),
                                    0, 2, 1, 3);
            };
            cur = attention(ctx, qx, all(cross->k(il)), all(cross->v(il)), nullptr, opt);
            ggml_format_name(cur, "dec%d.cross", (int) il);
            x = ggml_add(ctx, x, l.cross_o.forward(ctx, ggml_reshape_2d(ctx, cur, hd * hp.n_head, n)));
        }

        cur = norm(ctx, x, l.ffn_norm);
        if (hp.ffn == CausalDecoderHParams::Ffn::swiglu) {
            cur = ggml_swiglu_split(ctx, l.ffn_gate.forward(ctx, cur), l.ffn_up.forward(ctx, cur));
        } else {
            cur = gelu_erf(ctx, l.ffn_up.forward(ctx, cur), nullptr, opt);
        }
        x = ggml_add(ctx, x, l.ffn_down.forward(ctx, cur));
        ggml_format_name(x, "dec%d.out", (int) il);
    }
    return hp.final_norm ? norm(ctx, x, final_norm_) : x;
}

}  // namespace ov
