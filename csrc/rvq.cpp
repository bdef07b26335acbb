#include "rvq.h"

#include "rvq_nearest.h"

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

void ResidualVectorQuantizer::load_encode(GGUFFile & file, const std::string & prefix, int64_t hidden) {
    for (size_t q = 0; q < quantizers.size(); ++q) {
        const int64_t codebook_dim = quantizers[q].embed->ne[0];
        quantizers[q].project_in.load(file, prefix + ".quantizers." + std::to_string(q) + ".project_in", hidden,
                                      codebook_dim);
    }
}

// HiggsAudioV2TokenizerResidualVectorQuantization.encode
std::vector<ggml_tensor *> ResidualVectorQuantizer::encode(ggml_context * ctx, ggml_tensor * x) const {
    std::vector<ggml_tensor *> codes;
    ggml_tensor * residual = x;  // [hidden, T]
    for (size_t q = 0; q < quantizers.size(); ++q) {
        const VectorQuantizer & vq = quantizers[q];
        // HiggsAudioV2TokenizerEuclideanCodebook.quantize of project_in(residual)
        ggml_tensor * ids = ov_rvq_nearest(ctx, vq.project_in.forward(ctx, residual), vq.embed);  // [T]
        ggml_format_name(ids, "rvq.q%zu.codes", q);
        codes.push_back(ids);

        // HiggsAudioV2TokenizerVectorQuantization.decode of the chosen entries
        ggml_tensor * proj = vq.project_out.forward(ctx, ggml_get_rows(ctx, vq.embed, ids));  // [hidden, T]
        residual = ggml_sub(ctx, residual, proj);
    }
    return codes;
}

}  // namespace ov
