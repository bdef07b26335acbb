#include "rvq.h"

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

}  // namespace ov
