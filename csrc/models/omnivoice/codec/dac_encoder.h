#pragma once
// DAC's encoder (transformers' DacEncoder) as the Higgs Audio v2 tokenizer's acoustic stream:
// 24 kHz waveform -> hidden_size channels at sample_rate / hop_length frames per second.
#include <cstdint>
#include <string>
#include <vector>

#include "ggml.h"
#include "models/omnivoice/codec/dac.h"
#include "nn/layers.h"
#include "runtime/gguf_file.h"

namespace ov {

struct DacEncoderHParams {
    int encoder_hidden_size = 0;  // channels after conv1; doubled by every block
    int hidden_size = 0;          // output channels
    std::vector<int> ratios;      // downsampling_ratios

    static DacEncoderHParams load(const GGUFFile & file);
    // Frames the encoder yields for n_samples (0 if too short), as PyTorch's Conv1d arithmetic gives.
    int64_t n_frames(int64_t n_samples) const;
};

// DacEncoderBlock: three residual units (dilations 1, 3, 9), Snake, strided conv doubling channels
struct DacEncoderBlock {
    std::vector<DacResidualUnit> res_units;  // res_unit1..3
    Snake1d snake1;
    Conv1d conv1;
};

// DacEncoder
struct DacEncoder {
    DacEncoderHParams hp;
    Conv1d conv1;
    std::vector<DacEncoderBlock> block;
    Snake1d snake1;
    Conv1d conv2;

    // Registers the Snake reciprocals with `derived`; the caller materializes it.
    void load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, const DacEncoderHParams & hp);
    // wave: [n_samples] -> [hidden_size, T]
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * wave, const GraphOptions & opt) const;
};

}  // namespace ov
