#pragma once
// The codec's acoustic decoder: DAC's DacDecoder as HiggsAudioV2Tokenizer adjusts it (output_padding
// = stride % 2 on every ConvTranspose1d, no final tanh).
#include <cstdint>
#include <string>
#include <vector>

#include "models/omnivoice/codec/dac.h"
#include "nn/layers.h"
#include "runtime/gguf_file.h"

namespace ov {

struct DacDecoderHParams {
    int64_t in_channels = 0;        // acoustic hidden_size (256)
    int64_t channels = 0;           // decoder_hidden_size (1024), halved by every block
    std::vector<int> strides;       // upsampling_ratios ([8, 5, 4, 2, 3]), their product hop_length

    static DacDecoderHParams load(const GGUFFile & file);
};

// DacDecoderBlock(stride): Snake + ConvTranspose1d (upsample by stride) + 3 residual units
struct DacDecoderBlock {
    Snake1d snake1;
    ConvTranspose1d conv_t1;
    std::vector<DacResidualUnit> res_units;
};

struct DacDecoder {
    DacDecoderHParams hp;
    Conv1d conv1;
    std::vector<DacDecoderBlock> blocks;
    Snake1d snake1;
    Conv1d conv2;

    void load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, const DacDecoderHParams & hp);
    // x: [in_channels, T] -> audio [1, T * prod(strides)]
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * x, const GraphOptions & opt) const;
    // Input frames each side that an output frame's samples depend on (an upper bound, from the
    // kernels, dilations and strides: 13 for the real decoder): a window of input frames
    // decodes its inner frames exactly as the whole sequence would.
    int64_t context_frames() const;
};

}  // namespace ov
