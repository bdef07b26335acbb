#include "models/codec/rvq.h"

#include "rvq_encode.h"

namespace ov {

void ResidualVectorQuantizer::load_decode(GGUFFile & file, const std::string & prefix, int n_quantizers,
                                          int64_t codebook_size, int64_t codebook_dim, int64_t hidden) {
    quantizers.resize(n_quantizers);
    for (int q = 0; q < n_quantizers; ++q) {
        const std::string p = prefix + ".quantizers." + std::to_string(q);
        quantizers[q].embed = file.tensor(p + ".codebook.embed", {codebook_dim, codebook_size}, {GGML_TYPE_F32});
        quantizers[q].project_out.load(file, p + ".project_out", codebook_dim, hidden);
    }
}

// HiggsAudioV2TokenizerResidualVectorQuantization.decode
ggml_tensor * ResidualVectorQuantizer::decode(ggml_context * ctx, ggml_tensor * codes) const {
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

void ResidualVectorQuantizer::load_encode(GGUFFile & file, DerivedWeights & derived, const std::string & prefix,
                                          int64_t hidden) {
    std::vector<ggml_tensor *> w_in, b_in, embed, w_out, b_out;
    for (size_t q = 0; q < quantizers.size(); ++q) {
        VectorQuantizer & vq = quantizers[q];
        vq.project_in.load(file, prefix + ".quantizers." + std::to_string(q) + ".project_in", hidden,
                           vq.embed->ne[0]);
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

// HiggsAudioV2TokenizerResidualVectorQuantization.encode
ggml_tensor * ResidualVectorQuantizer::encode(ggml_context * ctx, ggml_tensor * x) const {
    ggml_tensor * codes = ov_rvq_encode(ctx, x, enc_w_in, enc_b_in, enc_embed, enc_w_out, enc_b_out,
                                        (int) quantizers.size());
    ggml_set_name(codes, "rvq.codes");
    return codes;
}

}  // namespace ov
