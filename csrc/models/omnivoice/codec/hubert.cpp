#include "models/omnivoice/codec/hubert.h"

#include <cmath>

#include "runtime/errors.h"

namespace ov {

namespace {

const char * kKey = "omnivoice.semantic";

void set_name(ggml_tensor * t, const std::string & name) { ggml_set_name(t, name.c_str()); }

}  // namespace

HubertHParams HubertHParams::load(const GGUFFile & file) {
    const std::string k = kKey;
    const auto key = [&k](const char * name) { return join_name(k, name); };
    HubertHParams hp;
    hp.n_embd = (int) file.get_u32(key("hidden_size"));
    hp.n_ff = (int) file.get_u32(key("intermediate_size"));
    hp.n_head = (int) file.get_u32(key("num_attention_heads"));
    hp.n_layer = (int) file.get_count(key("num_hidden_layers"));
    hp.conv_dim = file.get_int_array(key("conv_dim"));
    hp.conv_kernel = file.get_int_array(key("conv_kernel"));
    hp.conv_stride = file.get_int_array(key("conv_stride"));
    hp.n_pos_conv = (int) file.get_u32(key("num_conv_pos_embeddings"));
    hp.n_pos_groups = (int) file.get_u32(key("num_conv_pos_embedding_groups"));
    hp.eps = file.get_f32(key("layer_norm_eps"));

    // The variants HubertModel supports beyond the one the tokenizer ships are refused by name.
    const std::string where = file.path() + ": ";
    const std::string norm = file.get_str(key("feat_extract_norm"));
    if (norm != "group") {
        throw ModelFormatError(where + k + ".feat_extract_norm is '" + norm + "', only 'group' is supported");
    }
    if (file.get_bool(key("conv_bias"))) {
        throw ModelFormatError(where + k + ".conv_bias is true; only bias-free feature convs are supported");
    }
    if (!file.get_bool(key("feat_proj_layer_norm"))) {
        throw ModelFormatError(where + k +
                               ".feat_proj_layer_norm is false; only the LayerNorm projection is supported");
    }
    if (file.get_bool(key("do_stable_layer_norm"))) {
        throw ModelFormatError(where + k + ".do_stable_layer_norm is true; only post-LN encoder layers are supported");
    }
    if (hp.conv_dim.empty() || hp.conv_dim.size() != hp.conv_kernel.size() ||
        hp.conv_dim.size() != hp.conv_stride.size()) {
        throw ModelFormatError(where + k + ".conv_dim, conv_kernel and conv_stride must be non-empty and of equal "
                                           "length");
    }
    for (size_t i = 0; i < hp.conv_dim.size(); ++i) {
        if (hp.conv_dim[i] <= 0 || hp.conv_kernel[i] <= 0 || hp.conv_stride[i] <= 0) {
            throw ModelFormatError(where + k + ".conv_* entries must be positive");
        }
    }
    if (hp.n_embd <= 0 || hp.n_head <= 0 || hp.n_embd % hp.n_head != 0 || hp.n_pos_groups <= 0 ||
        hp.n_embd % hp.n_pos_groups != 0 || hp.n_pos_conv <= 0 || hp.n_layer <= 0 || hp.n_ff <= 0) {
        throw ModelFormatError(where + "inconsistent " + k +
                               ".* sizes (hidden_size must divide by heads and pos groups)");
    }
    return hp;
}

int64_t HubertHParams::n_frames(int64_t n_samples) const {
    int64_t n = n_samples;
    for (size_t i = 0; i < conv_kernel.size(); ++i) {
        n = conv1d_out_len(n, (int) conv_kernel[i], (int) conv_stride[i], 0, 1);
    }
    return n;
}

void HubertModel::load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix,
                       const HubertHParams & hparams) {
    hp = hparams;
    const int64_t C = hp.n_embd;
    int64_t in_ch = 1;
    for (size_t i = 0; i < hp.conv_dim.size(); ++i) {
        const std::string p = join_name(prefix, "feature_extractor", "conv_layers", i);
        Conv1d layer;
        layer.load(file, derived, join_name(p, "conv"), in_ch, hp.conv_dim[i], (int) hp.conv_kernel[i],
                   (int) hp.conv_stride[i], 0, 1, false);
        conv.push_back(layer);
        if (i == 0) {
            group_norm_w = file.tensor(join_name(p, "layer_norm", "weight"), {hp.conv_dim[i]}, {GGML_TYPE_F32});
            group_norm_b = file.tensor(join_name(p, "layer_norm", "bias"), {hp.conv_dim[i]}, {GGML_TYPE_F32});
        }
        in_ch = hp.conv_dim[i];
    }

    proj_norm.load(file, join_name(prefix, "feature_projection", "layer_norm"), in_ch, hp.eps);
    projection.load(file, join_name(prefix, "feature_projection", "projection"), in_ch, C);

    const std::string pos_conv = join_name(prefix, "encoder", "pos_conv_embed", "conv");
    pos_conv_w = file.tensor(join_name(pos_conv, "weight"), {hp.n_pos_conv, C / hp.n_pos_groups, C},
                             {GGML_TYPE_F32, GGML_TYPE_F16});
    pos_conv_b = file.tensor(join_name(pos_conv, "bias"), {C}, {GGML_TYPE_F32});
    enc_norm.load(file, join_name(prefix, "encoder", "layer_norm"), C, hp.eps);

    for (int il = 0; il < hp.n_layer; ++il) {
        const std::string p = join_name(prefix, "encoder", "layers", il);
        HubertLayer l;
        l.q_proj.load(file, join_name(p, "attention", "q_proj"), C, C);
        l.k_proj.load(file, join_name(p, "attention", "k_proj"), C, C);
        l.v_proj.load(file, join_name(p, "attention", "v_proj"), C, C);
        l.out_proj.load(file, join_name(p, "attention", "out_proj"), C, C);
        l.qkv_w = derived.concat({l.q_proj.weight, l.k_proj.weight, l.v_proj.weight});
        l.qkv_b = derived.concat({l.q_proj.bias, l.k_proj.bias, l.v_proj.bias});
        l.layer_norm.load(file, join_name(p, "layer_norm"), C, hp.eps);
        l.intermediate_dense.load(file, join_name(p, "feed_forward", "intermediate_dense"), C, hp.n_ff);
        l.output_dense.load(file, join_name(p, "feed_forward", "output_dense"), hp.n_ff, C);
        l.final_layer_norm.load(file, join_name(p, "final_layer_norm"), C, hp.eps);
        layers.push_back(l);
    }
}

ggml_tensor * HubertModel::forward(ggml_context * ctx, ggml_tensor * wave, const GraphOptions & opt) const {
    const int64_t C = hp.n_embd;
    const int64_t head_dim = C / hp.n_head;

    // HubertFeatureEncoder: GELU after every conv; GroupNorm with one group per channel after the
    // first, i.e. each channel normalised over time.
    ggml_tensor * cur = ggml_reshape_2d(ctx, wave, 1, wave->ne[0]);  // [1, n_samples]
    for (size_t i = 0; i < conv.size(); ++i) {
        cur = conv[i].forward(ctx, cur);  // [conv_dim[i], T_i]
        if (i == 0) cur = channel_norm(ctx, cur, group_norm_w, group_norm_b, hp.group_norm_eps, opt);
        cur = gelu_erf(ctx, cur, nullptr, opt);
        set_name(cur, "hubert.conv" + std::to_string(i));
    }
    ggml_set_name(cur, "hubert.conv_out");  // the extractor's output, whatever its depth
    const int64_t T = cur->ne[1];

    // HubertFeatureProjection
    cur = proj_norm.forward(ctx, cur, opt);
    cur = projection.forward(ctx, cur);  // [C, T]
    set_name(cur, "hubert.proj");

    // HubertPositionalConvEmbedding: grouped conv (the groups become the batch of im2col), GELU,
    // minus the one extra frame an even kernel with padding K/2 yields (HubertSamePadLayer).
    {
        const int64_t n_groups = hp.n_pos_groups;
        const int64_t cg = C / n_groups;
        const int64_t K = hp.n_pos_conv;
        ggml_tensor * xt = ggml_cont(ctx, ggml_transpose(ctx, cur));          // [T, C]
        xt = ggml_reshape_3d(ctx, xt, T, cg, n_groups);                        // [T, C/g, g]
        ggml_tensor * cols = ggml_im2col(ctx, pos_conv_w, xt, 1, 0, (int) (K / 2), 0, 1, 0, false,
                                         GGML_TYPE_F32);                       // [C/g*K, T', g]
        ggml_tensor * kern = ggml_reshape_3d(ctx, pos_conv_w, K * cg, cg, n_groups);
        ggml_tensor * pos = ggml_mul_mat(ctx, kern, cols);                     // [C/g, T', g]
        const int64_t T_pad = pos->ne[1];
        pos = ggml_cont(ctx, ggml_permute(ctx, pos, 0, 2, 1, 3));              // [C/g, g, T']
        pos = ggml_reshape_2d(ctx, pos, C, T_pad);                             // [C, T']
        pos = ggml_view_2d(ctx, pos, C, T, pos->nb[1], 0);                     // [C, T]
        pos = gelu_erf(ctx, pos, pos_conv_b, opt);  // the view is the contiguous first T steps
        set_name(pos, "hubert.pos_conv");
        cur = ggml_add(ctx, cur, pos);
    }

    // HubertEncoder (post-LN): the first hidden state is the input of layer 0, after layer_norm.
    cur = enc_norm.forward(ctx, cur, opt);
    set_name(cur, "hubert.hidden0");
    ggml_tensor * hidden_sum = cur;

    const float kq_scale = 1.0f / std::sqrt((float) head_dim);
    for (int il = 0; il < hp.n_layer; ++il) {
        const HubertLayer & l = layers[il];
        ggml_tensor * inpL = cur;

        // HubertAttention: bidirectional, no mask
        {
            // q, k, v in one matmul: rows [0, C), [C, 2C), [2C, 3C) of qkv
            ggml_tensor * qkv = ggml_mul_mat(ctx, ggml_reshape_2d(ctx, l.qkv_w, C, 3 * C), cur);
            qkv = ggml_add(ctx, qkv, l.qkv_b);  // [3C, T]
            const auto head_view = [&](int i) {  // [hd, T, H]
                ggml_tensor * t = ggml_view_3d(ctx, qkv, head_dim, hp.n_head, T, head_dim * qkv->nb[0], qkv->nb[1],
                                               i * C * qkv->nb[0]);
                return ggml_permute(ctx, t, 0, 2, 1, 3);
            };
            ggml_tensor * q = head_view(0);
            ggml_tensor * k = head_view(1);
            ggml_tensor * v = head_view(2);
            ggml_tensor * kqv = attention(ctx, q, k, v, kq_scale, opt);  // [hd, H, T]
            // out_proj without its bias: the LayerNorm op adds it, then the residual
            cur = ggml_mul_mat(ctx, l.out_proj.weight, ggml_reshape_2d(ctx, kqv, C, T));
            cur = l.layer_norm.forward(ctx, cur, opt, inpL, l.out_proj.bias);
        }

        // HubertFeedForward, then final_layer_norm over the residual sum; the biases of both
        // Linears are added inside the GELU and LayerNorm ops
        {
            ggml_tensor * ff = gelu_erf(ctx, ggml_mul_mat(ctx, l.intermediate_dense.weight, cur),
                                        l.intermediate_dense.bias, opt);  // [n_ff, T]
            ff = ggml_mul_mat(ctx, l.output_dense.weight, ff);        // [C, T]
            cur = l.final_layer_norm.forward(ctx, ff, opt, cur, l.output_dense.bias);
        }
        set_name(cur, "hubert.l" + std::to_string(il) + ".out");
        hidden_sum = ggml_add(ctx, hidden_sum, cur);
    }

    ggml_tensor * out = ggml_scale(ctx, hidden_sum, 1.0f / (float) (hp.n_layer + 1));  // [C, T]
    set_name(out, "hubert.out");
    return out;
}

}  // namespace ov
