#include "models/omnivoice/codec/dac_decoder.h"

#include <algorithm>
#include <iterator>

#include "runtime/errors.h"

namespace ov {

// DAC's fixed architecture: k7 convs around the blocks; residual units (models/omnivoice/codec/dac.h) dilated 1, 3, 9.
constexpr int kKernel = 7;
constexpr int kResidualDilations[] = {1, 3, 9};

DacDecoderHParams DacDecoderHParams::load(const GGUFFile & file) {
    DacDecoderHParams hp;
    hp.in_channels = file.get_u32("omnivoice.acoustic.hidden_size");
    hp.channels = file.get_u32("omnivoice.acoustic.decoder_hidden_size");
    const int64_t hop_length = file.get_u32("omnivoice.acoustic.hop_length");
    const auto bad = [&](const std::string & what) { throw ModelFormatError(file.path() + ": " + what); };
    if (hp.in_channels <= 0 || hp.channels <= 0) bad("omnivoice.acoustic hidden sizes must be positive");
    int64_t prod = 1;
    for (int64_t r : file.get_int_array("omnivoice.acoustic.upsampling_ratios")) {
        if (r <= 0) bad("omnivoice.acoustic.upsampling_ratios must be positive");
        hp.strides.push_back((int) r);
        prod *= r;
    }
    if (hp.strides.empty() || prod != hop_length) {
        bad("the product of omnivoice.acoustic.upsampling_ratios (" + std::to_string(prod) +
            ") differs from omnivoice.acoustic.hop_length (" + std::to_string(hop_length) + ")");
    }
    if (hp.channels % (int64_t(1) << hp.strides.size()) != 0) {
        bad("decoder_hidden_size " + std::to_string(hp.channels) + " is not divisible by 2^" +
            std::to_string(hp.strides.size()));
    }
    return hp;
}

void DacDecoder::load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix,
                      const DacDecoderHParams & hparams) {
    hp = hparams;
    const int pad = (kKernel - 1) / 2;
    conv1.load(file, derived, join_name(prefix, "conv1"), hp.in_channels, hp.channels, kKernel, 1, pad, 1);

    int64_t ch = hp.channels;
    blocks.resize(hp.strides.size());
    for (size_t ib = 0; ib < blocks.size(); ++ib) {
        DacDecoderBlock & b = blocks[ib];
        const std::string p = join_name(prefix, "block", ib);
        const int s = hp.strides[ib];
        b.snake1.load(file, derived, join_name(p, "snake1"), ch);
        b.conv_t1.load(file, derived, join_name(p, "conv_t1"), ch, ch / 2, 2 * s, s, (s + 1) / 2, s % 2);
        ch /= 2;
        b.res_units.resize(std::size(kResidualDilations));
        for (size_t ir = 0; ir < b.res_units.size(); ++ir) {
            b.res_units[ir].load(file, derived, join_name(p, "res_unit" + std::to_string(ir + 1)), ch,
                                 kResidualDilations[ir]);
        }
    }
    snake1.load(file, derived, join_name(prefix, "snake1"), ch);
    conv2.load(file, derived, join_name(prefix, "conv2"), ch, 1, kKernel, 1, pad, 1);
}

// Steps each side of an output step that a stride-1 conv reads.
static int64_t conv_reach(const Conv1d & c) {
    return std::max<int64_t>(c.padding, (int64_t) c.dilation * (c.kernel - 1) - c.padding);
}

int64_t DacDecoder::context_frames() const {
    // Backwards from the output, in steps at each stage's rate: a transposed conv's output step
    // t reads input steps within (t + padding - K, t + padding] / stride.
    int64_t reach = conv_reach(conv2);
    for (size_t ib = blocks.size(); ib-- > 0;) {
        for (const DacResidualUnit & ru : blocks[ib].res_units) reach += conv_reach(ru.conv1) + conv_reach(ru.conv2);
        const ConvTranspose1d & up = blocks[ib].conv_t1;
        reach = (reach + up.kernel + up.stride - 1) / up.stride + 1;
    }
    return reach + conv_reach(conv1);
}

// DacDecoder.forward (tanh replaced by identity)
ggml_tensor * DacDecoder::forward(ggml_context * ctx, ggml_tensor * x, const GraphOptions & opt) const {
    // cur: [channels, T]
    ggml_tensor * cur = conv1.forward(ctx, x);
    ggml_set_name(cur, "dec.conv1.out");

    for (size_t ib = 0; ib < blocks.size(); ++ib) {
        const DacDecoderBlock & b = blocks[ib];
        // upsample: [C, T] -> [C/2, T*stride]
        {
            cur = b.snake1.forward(ctx, cur, opt);
            cur = b.conv_t1.forward(ctx, cur);
            ggml_format_name(cur, "dec.blk%zu.up.out", ib);
        }
        // residual units
        for (size_t ir = 0; ir < b.res_units.size(); ++ir) {
            cur = b.res_units[ir].forward(ctx, cur, opt);
            ggml_format_name(cur, "dec.blk%zu.res%zu.out", ib, ir + 1);
        }
    }

    cur = snake1.forward(ctx, cur, opt);
    ggml_set_name(cur, "dec.snake1.out");
    // out: [1, T_audio]
    cur = conv2.forward(ctx, cur);
    ggml_set_name(cur, "dec.out");
    return cur;
}

}  // namespace ov
