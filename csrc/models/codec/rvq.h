#pragma once
// HiggsAudioV2TokenizerResidualVectorQuantization: 8 codebooks whose projected entries are summed.
// Decode side here; the encode side (project_in, nearest-entry search) hooks into the same structs.
#include <cstdint>
#include <string>
#include <vector>

#include "nn/layers.h"
#include "runtime/gguf_file.h"

namespace ov {

// HiggsAudioV2TokenizerVectorQuantization (one codebook)
struct VectorQuantizer {
    ggml_tensor * embed = nullptr;  // codebook.embed: [codebook_dim, codebook_size]
    Linear project_out;             // codebook_dim -> hidden
    Linear project_in;              // hidden -> codebook_dim, encode only
};

struct ResidualVectorQuantizer {
    std::vector<VectorQuantizer> quantizers;
    // Encode weights of all codebooks end to end: project_in, codebook.embed, project_out.
    ggml_tensor *enc_w_in = nullptr, *enc_b_in = nullptr, *enc_embed = nullptr, *enc_w_out = nullptr,
                *enc_b_out = nullptr;

    // Loads the decode weights of `n_quantizers` codebooks under `prefix` ("quantizer").
    void load_decode(GGUFFile & file, const std::string & prefix, int n_quantizers, int64_t codebook_size,
                     int64_t codebook_dim, int64_t hidden);
    // codes: [T, n_q] I32 (row q = codebook q) -> sum_q project_out_q(embed_q[codes[q]]): [hidden, T]
    ggml_tensor * decode(ggml_context * ctx, ggml_tensor * codes) const;

    // Loads project_in of every codebook (call after load_decode) and joins each kind of encode
    // weight across codebooks for ov_rvq_encode.
    void load_encode(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, int64_t hidden);
    // x: [hidden, T] -> codes [T, n_q] I32 (row q = codebook q).
    ggml_tensor * encode(ggml_context * ctx, ggml_tensor * x) const;
};

}  // namespace ov
