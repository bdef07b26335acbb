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

    // `channels` is HuBERT's hidden size; the rest comes from omnivoice.semantic_encoder.*.
    static SemanticEncoderHParams load(const GGUFFile & file, int channels);
};

// HiggsAudioV2TokenizerResidualUnit: x + conv2(elu(conv1(elu(x))))
struct SemanticResidualUnit {
    Conv1d conv1, conv2;
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * x) const;
};

// HiggsAudioV2TokenizerSemanticEncoderBlock: residual units, then a (strided) conv
struct SemanticEncoderBlock {
    std::vector<SemanticResidualUnit> res_units;
    Conv1d conv;
};

// SemanticEncoder
struct SemanticEncoder {
    Conv1d conv;
    std::vector<SemanticEncoderBlock> conv_blocks;
    int out_channels = 0;

    void load(GGUFFile & file, DerivedWeights & derived, const SemanticEncoderHParams & hp, const std::string & prefix);
    // Output frames for n input frames (n itself for the real model's strides of 1).
    int64_t n_frames(int64_t n) const;
    // x: [channels, T] -> [out_channels, n_frames(T)]
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * x) const;
};

}  // namespace ov
