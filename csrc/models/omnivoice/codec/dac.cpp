#include "models/omnivoice/codec/dac.h"

namespace ov {

// DAC's residual units always use kernel 7.
constexpr int kResidualKernel = 7;

void DacResidualUnit::load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, int64_t channels,
                           int dilation) {
    snake1.load(file, derived, join_name(prefix, "snake1"), channels);
    conv1.load(file, derived, join_name(prefix, "conv1"), channels, channels, kResidualKernel, 1,
               (kResidualKernel - 1) / 2 * dilation, dilation);
    snake2.load(file, derived, join_name(prefix, "snake2"), channels);
    conv2.load(file, derived, join_name(prefix, "conv2"), channels, channels, 1, 1, 0, 1);
}

ggml_tensor * DacResidualUnit::forward(ggml_context * ctx, ggml_tensor * x, const GraphOptions & opt) const {
    ggml_tensor * y = conv1.forward(ctx, snake1.forward(ctx, x, opt));
    return conv2.forward(ctx, snake2.forward(ctx, y, opt), x);
}

}  // namespace ov
