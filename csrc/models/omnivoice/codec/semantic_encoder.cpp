#include "models/omnivoice/codec/semantic_encoder.h"

#include "runtime/errors.h"

namespace ov {

namespace {

const std::string kKey = "omnivoice.semantic_encoder";

}  // namespace

SemanticEncoderHParams SemanticEncoderHParams::load(const GGUFFile & file) {
    SemanticEncoderHParams hp;
    hp.channels = (int) file.get_u32("omnivoice.semantic.hidden_size");
    hp.kernel_size = (int) file.get_u32(join_name(kKey, "kernel_size"));
    hp.strides = file.get_int_array(join_name(kKey, "strides"));
    hp.channel_ratios = file.get_int_array(join_name(kKey, "channel_ratios"));
    hp.block_dilations = file.get_int_array(join_name(kKey, "block_dilations"));
    hp.unit_kernel_size = (int) file.get_u32(join_name(kKey, "unit_kernel_size"));
    if (hp.strides.size() != hp.channel_ratios.size()) {
        throw ModelFormatError(file.path() + ": " + kKey + ".strides and channel_ratios differ in length");
    }
    for (size_t i = 0; i < hp.strides.size(); ++i) {
        if (hp.strides[i] <= 0 || hp.channel_ratios[i] <= 0) {
            throw ModelFormatError(file.path() + ": " + kKey + ".strides and channel_ratios must be positive");
        }
    }
    for (int64_t d : hp.block_dilations) {
        if (d <= 0) throw ModelFormatError(file.path() + ": " + kKey + ".block_dilations must be positive");
    }
    if (hp.kernel_size <= 0 || hp.unit_kernel_size <= 0) {
        throw ModelFormatError(file.path() + ": " + kKey + ".kernel sizes must be positive");
    }
    return hp;
}

ggml_tensor * SemanticResidualUnit::forward(ggml_context * ctx, ggml_tensor * x, const GraphOptions &) const {
    ggml_tensor * y = conv1.forward(ctx, ggml_elu(ctx, x));
    return conv2.forward(ctx, ggml_elu(ctx, y), x);
}

void SemanticEncoder::load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix,
                           const SemanticEncoderHParams & hparams) {
    hp = hparams;
    const int64_t C = hp.channels;
    conv.load(file, derived, join_name(prefix, "conv"), C, C, hp.kernel_size, 1, hp.kernel_size / 2, 1, false);
    int64_t in_ch = C;
    for (size_t i = 0; i < hp.strides.size(); ++i) {
        const std::string p = join_name(prefix, "conv_blocks", i);
        const int64_t out_ch = C * hp.channel_ratios[i];
        SemanticEncoderBlock block;
        for (size_t j = 0; j < hp.block_dilations.size(); ++j) {
            const std::string pu = join_name(p, "res_units", j);
            const int d = (int) hp.block_dilations[j];
            SemanticResidualUnit unit;
            unit.conv1.load(file, derived, join_name(pu, "conv1"), in_ch, in_ch, hp.unit_kernel_size, 1,
                            (hp.unit_kernel_size - 1) / 2 * d, d, false);
            unit.conv2.load(file, derived, join_name(pu, "conv2"), in_ch, in_ch, 1, 1, 0, 1, false);
            block.res_units.push_back(unit);
        }
        // A stride-1 block uses kernel 3 rather than 2 * stride (the reference's special case).
        const int stride = (int) hp.strides[i];
        const int kernel = stride == 1 ? 3 : 2 * stride;
        block.conv.load(file, derived, join_name(p, "conv"), in_ch, out_ch, kernel, stride, (kernel - 1) / 2, 1, true);
        conv_blocks.push_back(block);
        in_ch = out_ch;
    }
}

int64_t SemanticEncoder::n_frames(int64_t n) const {
    for (const SemanticEncoderBlock & b : conv_blocks) {
        n = b.conv.out_len(n);
    }
    return n;
}

ggml_tensor * SemanticEncoder::forward(ggml_context * ctx, ggml_tensor * x, const GraphOptions & opt) const {
    ggml_tensor * cur = conv.forward(ctx, x);
    for (size_t i = 0; i < conv_blocks.size(); ++i) {
        for (const SemanticResidualUnit & unit : conv_blocks[i].res_units) cur = unit.forward(ctx, cur, opt);
        cur = conv_blocks[i].conv.forward(ctx, cur);
        ggml_format_name(cur, "sem_enc.blk%zu", i);
    }
    return cur;
}

}  // namespace ov
