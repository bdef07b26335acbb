#include "models/omnivoice/codec/rvq.h"

#include "rvq_encode.h"
#include "runtime/errors.h"

namespace ov {

RvqHParams RvqHParams::load(const GGUFFile & file) {
    RvqHParams hp;
    hp.n_quantizers = (int) file.get_count("omnivoice.n_quantizers");
    hp.codebook_size = file.get_u32("omnivoice.codebook_size");
    hp.codebook_dim = file.get_u32("omnivoice.codebook_dim");
    hp.hidden = (int64_t) file.get_u32("omnivoice.acoustic.hidden_size") +
                file.get_u32("omnivoice.semantic.hidden_size");
    hp.has_encoder = file.get_bool("omnivoice.has_encoder");
    if (hp.n_quantizers <= 0 || hp.codebook_size <= 0 || hp.codebook_dim <= 0) {
        throw ModelFormatError(file.path() +
                               ": omnivoice.n_quantizers, codebook_size and codebook_dim must be positive");
    }
    return hp;
}

void ResidualVectorQuantizer::load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix,
                                   const RvqHParams & hparams) {
    hp = hparams;
    quantizers.resize(hp.n_quantizers);
    for (int q = 0; q < hp.n_quantizers; ++q) {
        VectorQuantizer & vq = quantizers[q];
        const std::string p = join_name(prefix, "quantizers", q);
        vq.embed = file.tensor(join_name(p, "codebook", "embed"), {hp.codebook_dim, hp.codebook_size}, {GGML_TYPE_F32});
        vq.project_out.load(file, join_name(p, "project_out"), hp.codebook_dim, hp.hidden);
        if (hp.has_encoder) vq.project_in.load(file, join_name(p, "project_in"), hp.hidden, hp.codebook_dim);
    }
    // The stock-op graph reads each codebook's own weights; ov_rvq_encode them joined.
    if (!hp.has_encoder || derived.stock_ops()) return;
    std::vector<ggml_tensor *> w_in, b_in, embed, w_out, b_out;
    for (const VectorQuantizer & vq : quantizers) {
        w_in.push_back(vq.project_in.weight);
        b_in.push_back(vq.project_in.bias);
        embed.push_back(vq.embed);
        w_out.push_back(vq.project_out.weight);
        b_out.push_back(vq.project_out.bias);
    }
    enc_w_in = derived.concat(w_in);
    enc_b_in = derived.concat(b_in);
    enc_embed = derived.concat(embed);
    enc_w_out = derived.concat(w_out);
    enc_b_out = derived.concat(b_out);
}

// HiggsAudioV2TokenizerResidualVectorQuantization.decode
ggml_tensor * ResidualVectorQuantizer::decode(ggml_context * ctx, ggml_tensor * codes, const GraphOptions &) const {
    const int64_t n_frames = codes->ne[0];
    ggml_tensor * sum = nullptr;
    for (size_t q = 0; q < quantizers.size(); ++q) {
        const VectorQuantizer & vq = quantizers[q];
        // ids: [T]; entry: [codebook_dim, T]; proj: [hidden, T]
        ggml_tensor * ids = ggml_view_1d(ctx, codes, n_frames, q * codes->nb[1]);
        ggml_tensor * entry = ggml_get_rows(ctx, vq.embed, ids);
        ggml_tensor * proj = vq.project_out.forward(ctx, entry);
        ggml_format_name(proj, "rvq.q%zu.out", q);
        sum = sum ? ggml_add(ctx, sum, proj) : proj;
    }
    ggml_set_name(sum, "rvq.sum");
    return sum;
}

// HiggsAudioV2TokenizerResidualVectorQuantization.encode
ggml_tensor * ResidualVectorQuantizer::encode(ggml_context * ctx, ggml_tensor * x, const GraphOptions & opt) const {
    ggml_tensor * codes = nullptr;
    if (!opt.stock_ops) {
        codes = ov_rvq_encode(ctx, x, enc_w_in, enc_b_in, enc_embed, enc_w_out, enc_b_out, (int) quantizers.size());
    } else {
        ggml_tensor * residual = x;  // [hidden, T]
        for (size_t q = 0; q < quantizers.size(); ++q) {
            const VectorQuantizer & vq = quantizers[q];
            // The nearest entry by the reference's distance -((|h|^2 - 2 h.e) + |e|^2), negated
            // exactly as (2 h.e - |h|^2) - |e|^2; argmax takes the first index on ties, as torch.
            ggml_tensor * h = vq.project_in.forward(ctx, residual);                        // [dim, T]
            ggml_tensor * hh = ggml_sum_rows(ctx, ggml_sqr(ctx, h));                        // [1, T]
            ggml_tensor * ee = ggml_sum_rows(ctx, ggml_sqr(ctx, vq.embed));                 // [1, size]
            ggml_tensor * he2 = ggml_scale(ctx, ggml_mul_mat(ctx, vq.embed, h), 2.0f);     // [size, T]
            ggml_tensor * score = ggml_sub(ctx, ggml_sub(ctx, he2, hh), ggml_reshape_2d(ctx, ee, ee->ne[1], 1));
            ggml_tensor * ids = ggml_argmax(ctx, score);                                    // [T] I32
            ggml_tensor * proj = vq.project_out.forward(ctx, ggml_get_rows(ctx, vq.embed, ids));
            residual = ggml_sub(ctx, residual, proj);
            ids = ggml_reshape_2d(ctx, ids, ids->ne[0], 1);
            codes = codes ? ggml_concat(ctx, codes, ids, 1) : ids;  // [T, q + 1]
        }
        codes = ggml_cont(ctx, codes);  // a single codebook's ids are a reshape, not an op result
    }
    ggml_set_name(codes, "rvq.codes");
    return codes;
}

}  // namespace ov
