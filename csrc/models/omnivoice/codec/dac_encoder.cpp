#include "models/omnivoice/codec/dac_encoder.h"

#include <iterator>

#include "runtime/errors.h"

namespace ov {

namespace {

// DAC builds these into its modules rather than its config.
constexpr int kInputKernel = 7;     // conv1
constexpr int kOutputKernel = 3;    // conv2
constexpr int kDilations[] = {1, 3, 9};  // residual units of every block

}  // namespace

DacEncoderHParams DacEncoderHParams::load(const GGUFFile & file) {
    DacEncoderHParams hp;
    hp.encoder_hidden_size = (int) file.get_u32("omnivoice.acoustic.encoder_hidden_size");
    hp.hidden_size = (int) file.get_u32("omnivoice.acoustic.hidden_size");
    for (int64_t r : file.get_int_array("omnivoice.acoustic.downsampling_ratios")) {
        if (r <= 0) throw ModelFormatError(file.path() + ": omnivoice.acoustic.downsampling_ratios must be positive");
        hp.ratios.push_back((int) r);
    }
    if (hp.encoder_hidden_size <= 0 || hp.hidden_size <= 0) {
        throw ModelFormatError(file.path() + ": omnivoice.acoustic encoder sizes must be positive");
    }
    return hp;
}

int64_t DacEncoderHParams::n_frames(int64_t n_samples) const {
    int64_t n = conv1d_out_len(n_samples, kInputKernel, 1, kInputKernel / 2, 1);
    for (int r : ratios) n = conv1d_out_len(n, 2 * r, r, (r + 1) / 2, 1);
    return conv1d_out_len(n, kOutputKernel, 1, kOutputKernel / 2, 1);
}

void DacEncoder::load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix,
                      const DacEncoderHParams & hparams) {
    hp = hparams;
    int64_t ch = hp.encoder_hidden_size;
    conv1.load(file, derived, join_name(prefix, "conv1"), 1, ch, kInputKernel, 1, kInputKernel / 2, 1);
    for (size_t i = 0; i < hp.ratios.size(); ++i) {
        const std::string p = join_name(prefix, "block", i);
        const int r = hp.ratios[i];
        DacEncoderBlock b;
        b.res_units.resize(std::size(kDilations));
        for (size_t ir = 0; ir < b.res_units.size(); ++ir) {
            b.res_units[ir].load(file, derived, join_name(p, "res_unit" + std::to_string(ir + 1)), ch,
                                 kDilations[ir]);
        }
        b.snake1.load(file, derived, join_name(p, "snake1"), ch);
        b.conv1.load(file, derived, join_name(p, "conv1"), ch, 2 * ch, 2 * r, r, (r + 1) / 2, 1);
        block.push_back(b);
        ch *= 2;
    }
    snake1.load(file, derived, join_name(prefix, "snake1"), ch);
    conv2.load(file, derived, join_name(prefix, "conv2"), ch, hp.hidden_size, kOutputKernel, 1, kOutputKernel / 2, 1);
}

ggml_tensor * DacEncoder::forward(ggml_context * ctx, ggml_tensor * wave, const GraphOptions & opt) const {
    ggml_tensor * cur = conv1.forward(ctx, ggml_reshape_2d(ctx, wave, 1, wave->ne[0]));  // [C0, T]
    ggml_set_name(cur, "dac_enc.conv1");
    for (size_t i = 0; i < block.size(); ++i) {
        const DacEncoderBlock & b = block[i];
        for (const DacResidualUnit & ru : b.res_units) cur = ru.forward(ctx, cur, opt);
        cur = b.conv1.forward(ctx, b.snake1.forward(ctx, cur, opt));  // [2 * C, T / ratio]
        ggml_format_name(cur, "dac_enc.blk%zu", i);
    }
    cur = conv2.forward(ctx, snake1.forward(ctx, cur, opt));  // [hidden_size, T_frames]
    ggml_set_name(cur, "dac_enc.out");
    return cur;
}

}  // namespace ov
