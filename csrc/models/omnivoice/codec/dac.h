#pragma once
// Parts of DAC shared by the codec's acoustic encoder and decoder.
#include <cstdint>
#include <string>

#include "nn/layers.h"
#include "runtime/gguf_file.h"

namespace ov {

// DacResidualUnit(dimension, dilation), shared by DAC's encoder and decoder:
// x + conv2(snake2(conv1(snake1(x)))) with conv1 k7 dilated, conv2 k1. Padding 3 * dilation keeps
// the length, so DAC's crop of the skip path before the add never applies.
struct DacResidualUnit {
    Snake1d snake1;
    Conv1d conv1;
    Snake1d snake2;
    Conv1d conv2;

    void load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, int64_t channels, int dilation);
    // x: [C, T] -> [C, T]
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * x, const GraphOptions & opt) const;
};

}  // namespace ov
