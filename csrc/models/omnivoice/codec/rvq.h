#pragma once
// HiggsAudioV2TokenizerResidualVectorQuantization: 8 codebooks whose projected entries are summed
// (decode), or a nearest-entry search per codebook on the running residual (encode).
#include <cstdint>
#include <string>
#include <vector>

#include "nn/layers.h"
#include "runtime/gguf_file.h"

namespace ov {

struct RvqHParams {
    int n_quantizers = 0;       // 8 codebooks
    int64_t codebook_size = 0;  // 1024 entries each
    int64_t codebook_dim = 0;   // 64
    int64_t hidden = 0;         // acoustic + semantic hidden sizes = 1024: the quantizers' space
    bool has_encoder = false;   // project_in is stored (omnivoice.has_encoder)

    static RvqHParams load(const GGUFFile & file);
};

// HiggsAudioV2TokenizerVectorQuantization (one codebook)
struct VectorQuantizer {
    ggml_tensor * embed = nullptr;  // codebook.embed: [codebook_dim, codebook_size]
    Linear project_out;             // codebook_dim -> hidden
    Linear project_in;              // hidden -> codebook_dim, encode only
};

struct ResidualVectorQuantizer {
    RvqHParams hp;
    std::vector<VectorQuantizer> quantizers;
    // Encode weights of all codebooks end to end: project_in, codebook.embed, project_out.
    ggml_tensor *enc_w_in = nullptr, *enc_b_in = nullptr, *enc_embed = nullptr, *enc_w_out = nullptr,
                *enc_b_out = nullptr;

    // Loads every codebook under `prefix` ("quantizer"); with hp.has_encoder also project_in,
    // and joins each kind of encode weight across codebooks for ov_rvq_encode.
    void load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, const RvqHParams & hp);
    // codes: [T, n_q] I32 (row q = codebook q) -> sum_q project_out_q(embed_q[codes[q]]): [hidden, T]
    ggml_tensor * decode(ggml_context * ctx, ggml_tensor * codes, const GraphOptions & opt) const;
    // x: [hidden, T] -> codes [T, n_q] I32 (row q = codebook q).
    // opt.stock_ops: one get_rows/mul_mat/argmax chain per codebook instead of ov_rvq_encode.
    ggml_tensor * encode(ggml_context * ctx, ggml_tensor * x, const GraphOptions & opt) const;
};

}  // namespace ov
