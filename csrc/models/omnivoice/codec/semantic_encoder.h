#pragma once
// The Higgs Audio v2 tokenizer's SemanticEncoder: a conv stack over the (downsampled) HuBERT
// features before they are joined with the acoustic stream.
#include <cstdint>
#include <string>
#include <vector>

#include "ggml.h"
#include "nn/layers.h"
#include "runtime/gguf_file.h"

namespace ov {

struct SemanticEncoderHParams {
    int channels = 0;          // semantic hidden size (HuBERT's)
    int kernel_size = 0;       // first conv
    int unit_kernel_size = 0;  // residual units' dilated conv
    std::vector<int64_t> strides, channel_ratios, block_dilations;

    // `channels` is HuBERT's hidden size (omnivoice.semantic.hidden_size); the rest comes from
    // omnivoice.semantic_encoder.*.
    static SemanticEncoderHParams load(const GGUFFile & file);
    // Channels of the output: channels times the last block's ratio.
    int64_t out_channels() const { return channel_ratios.empty() ? channels : channels * channel_ratios.back(); }
};

// HiggsAudioV2TokenizerResidualUnit: x + conv2(elu(conv1(elu(x))))
struct SemanticResidualUnit {
    Conv1d conv1, conv2;
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * x, const GraphOptions & opt) const;
};

// HiggsAudioV2TokenizerSemanticEncoderBlock: residual units, then a (strided) conv
struct SemanticEncoderBlock {
    std::vector<SemanticResidualUnit> res_units;
    Conv1d conv;
};

// SemanticEncoder
struct SemanticEncoder {
    SemanticEncoderHParams hp;
    Conv1d conv;
    std::vector<SemanticEncoderBlock> conv_blocks;

    void load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, const SemanticEncoderHParams & hp);
    // Output frames for n input frames (n itself for the real model's strides of 1).
    int64_t n_frames(int64_t n) const;
    // x: [channels, T] -> [out_channels(), n_frames(T)]
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * x, const GraphOptions & opt) const;
};

}  // namespace ov
