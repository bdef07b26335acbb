#pragma once
// HuBERT base as the Higgs Audio v2 tokenizer uses it for its semantic stream (transformers'
// HubertModel with feat_extract_norm "group", bias-free feature convs, a LayerNorm feature
// projection and do_stable_layer_norm false; other variants are refused at load): a strided conv
// feature extractor, a projection, a grouped positional conv and post-LN transformer layers.
// The tokenizer consumes the mean of all hidden states, so that is what the graph returns.
#include <cstdint>
#include <string>
#include <vector>

#include "ggml.h"
#include "nn/layers.h"
#include "runtime/gguf_file.h"

namespace ov {

struct HubertHParams {
    int n_embd = 0;      // hidden_size
    int n_ff = 0;        // intermediate_size
    int n_head = 0;      // num_attention_heads
    int n_layer = 0;     // num_hidden_layers
    std::vector<int64_t> conv_dim, conv_kernel, conv_stride;
    int n_pos_conv = 0;  // num_conv_pos_embeddings (kernel of the positional conv)
    int n_pos_groups = 0;
    float eps = 0.0f;    // layer_norm_eps
    // nn.GroupNorm of the first feature conv is built without an eps argument: torch's default.
    float group_norm_eps = 1e-5f;

    static HubertHParams load(const GGUFFile & file);

    // Frames the feature extractor yields for n_samples of 16 kHz input (0 if too short).
    int64_t n_frames(int64_t n_samples) const;
};

// HubertEncoderLayer
struct HubertLayer {
    Linear q_proj, k_proj, v_proj, out_proj;  // attention.*
    // q_proj, k_proj, v_proj as one Linear (DerivedWeights::concat): [C*3C] and [3C]
    ggml_tensor * qkv_w = nullptr;
    ggml_tensor * qkv_b = nullptr;
    LayerNorm layer_norm;
    Linear intermediate_dense, output_dense;  // feed_forward.*
    LayerNorm final_layer_norm;
};

// HubertModel(wave, output_hidden_states=True), then mean over the n_layer + 1 hidden states.
struct HubertModel {
    HubertHParams hp;
    // feature_extractor.conv_layers.N: conv (no bias), GroupNorm on the first only
    std::vector<Conv1d> conv;
    ggml_tensor * group_norm_w = nullptr;  // [conv_dim[0]]
    ggml_tensor * group_norm_b = nullptr;
    // feature_projection
    LayerNorm proj_norm;
    Linear projection;
    // encoder.pos_conv_embed.conv: grouped, weight norm folded by the converter
    ggml_tensor * pos_conv_w = nullptr;  // [K, C/groups, C]
    ggml_tensor * pos_conv_b = nullptr;  // [C]
    LayerNorm enc_norm;                  // encoder.layer_norm
    std::vector<HubertLayer> layers;

    // Looks every tensor up under `prefix` (e.g. "hubert") with the shapes hp implies; conv
    // weight rearrangements are registered with `derived`.
    void load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, const HubertHParams & hp);
    // wave: [n_samples] f32 at 16 kHz -> [n_embd, n_frames]
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * wave, const GraphOptions & opt) const;
};

}  // namespace ov
