#include "models/sopro/vocoder.h"

#include <cmath>
#include <limits>

#include "runtime/errors.h"

namespace ov {

// The convs' kernel (upstream hard-codes 7 taps: 6 frames of context around each output).
constexpr int kKernel = 7;
// nn.LayerNorm(dim, eps=1e-6) everywhere in the vocoder.
constexpr float kLayerNormEps = 1e-6f;

VocoderHParams VocoderHParams::load(const GGUFFile & file) {
    const std::string p = "sopro-tts.vocoder.";
    VocoderHParams hp;
    hp.n_mels = (int) file.get_u32_in(p + "n_mels", 1, 4096);
    hp.dim = (int) file.get_u32_in(p + "dim", 1, 1 << 16);
    hp.intermediate_dim = (int) file.get_u32_in(p + "intermediate_dim", 1, 1 << 18);
    hp.n_layers = (int) file.get_count(p + "num_layers");
    hp.n_fft = (int) file.get_u32_in(p + "n_fft", 2, 1 << 15);
    hp.hop = (int) file.get_u32_in(p + "hop_length", 1, hp.n_fft);
    if (hp.n_fft % 2 != 0) throw ModelFormatError(p + "n_fft must be even, got " + std::to_string(hp.n_fft));
    hp.max_magnitude = file.get_f32(p + "max_magnitude");
    if (!(hp.max_magnitude > 0.0f) || !std::isfinite(hp.max_magnitude)) {
        throw ModelFormatError(p + "max_magnitude must be positive and finite");
    }
    // The converter resolves upstream's causal: false and null block_lookaheads to lookaheads.
    const bool causal = file.get_bool(p + "causal");
    const int centred = (kKernel - 1) / 2;
    hp.embed_lookahead = causal ? (int) file.get_u32_in(p + "lookahead_frames", 0, kKernel - 1) : centred;
    if (causal) {
        for (int64_t v : file.get_int_array(p + "block_lookaheads")) {
            if (v < 0 || v > kKernel - 1) {
                throw ModelFormatError(p + "block_lookaheads must lie in [0, 6], got " + std::to_string(v));
            }
            hp.block_lookaheads.push_back((int) v);
        }
        if ((int) hp.block_lookaheads.size() != hp.n_layers) {
            throw ModelFormatError(p + "block_lookaheads must hold num_layers = " + std::to_string(hp.n_layers) +
                                   " values, got " + std::to_string(hp.block_lookaheads.size()));
        }
    } else {
        hp.block_lookaheads.assign(hp.n_layers, centred);
    }
    return hp;
}

void VocoderBlock::load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix,
                        const VocoderHParams & hp, int lookahead, bool allow_packed) {
    dwconv.load(file, derived, join_name(prefix, "dwconv"), hp.dim, hp.dim, hp.dim, kKernel, kKernel - 1 - lookahead,
                lookahead, 1);
    norm.load(file, join_name(prefix, "norm"), hp.dim, kLayerNormEps);
    const std::vector<ggml_type> types = {GGML_TYPE_F32, GGML_TYPE_F16};
    pwconv1.load(file, join_name(prefix, "pwconv1"), hp.dim, hp.intermediate_dim, true, types, allow_packed);
    pwconv2.load(file, join_name(prefix, "pwconv2"), hp.intermediate_dim, hp.dim, true, types, allow_packed);
    gamma = file.tensor(join_name(prefix, "gamma"), {hp.dim}, {GGML_TYPE_F32});
}

ggml_tensor * VocoderBlock::forward(ggml_context * ctx, ggml_tensor * x, const GraphOptions & opt) const {
    ggml_tensor * h = norm.forward(ctx, dwconv.forward(ctx, x), opt);
    h = pwconv2.forward(ctx, gelu_erf(ctx, pwconv1.forward(ctx, h), nullptr, opt));
    return ggml_add(ctx, x, ggml_mul(ctx, h, gamma));
}

void Vocoder::load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, const VocoderHParams & hp,
                   bool allow_packed) {
    hp_ = hp;
    const std::string bb = join_name(prefix, "backbone");
    embed_.load(file, derived, join_name(bb, "embed"), hp.n_mels, hp.dim, 1, kKernel,
                kKernel - 1 - hp.embed_lookahead, hp.embed_lookahead, 1);
    norm_.load(file, join_name(bb, "norm"), hp.dim, kLayerNormEps);
    blocks_.resize(hp.n_layers);
    for (int il = 0; il < hp.n_layers; ++il) {
        blocks_[il].load(file, derived, join_name(bb, "convnext", il), hp, hp.block_lookaheads[il], allow_packed);
    }
    final_norm_.load(file, join_name(bb, "final_layer_norm"), hp.dim, kLayerNormEps);
    out_.load(file, join_name(prefix, "head.out"), hp.dim, hp.n_fft + 2, true, {GGML_TYPE_F32, GGML_TYPE_F16},
              allow_packed);
    istft_.load(file, derived, join_name(prefix, "head.istft.window"), hp.n_fft, hp.hop);
    // As torch.clamp(mag, max=math.log(max_magnitude)) rounds the bound: to float.
    log_max_magnitude_ = (float) std::log((double) hp.max_magnitude);
}

ggml_tensor * Vocoder::backbone(ggml_context * ctx, ggml_tensor * mel, const GraphOptions & opt) const {
    // Backbone.forward
    ggml_tensor * x = norm_.forward(ctx, embed_.forward(ctx, mel), opt);
    ggml_set_name(x, "voc.embed");
    for (size_t il = 0; il < blocks_.size(); ++il) {
        x = blocks_[il].forward(ctx, x, opt);
        ggml_format_name(x, "voc.blk%zu", il);
    }
    x = final_norm_.forward(ctx, x, opt);
    ggml_set_name(x, "voc.backbone");
    return x;
}

ggml_tensor * Vocoder::forward(ggml_context * ctx, ggml_tensor * mel, const GraphOptions & opt) const {
    // ISTFTHead.spectrogram: h [n_fft + 2, T] = magnitudes of bins 0..n_fft/2, then their phases
    ggml_tensor * h = out_.forward(ctx, backbone(ctx, mel, opt));
    const int64_t n_bins = hp_.n_fft / 2 + 1, n_frames = h->ne[1];
    const auto rows = [&](int64_t first) {
        return ggml_cont(ctx, ggml_view_2d(ctx, h, n_bins, n_frames, h->nb[1], first * sizeof(float)));
    };
    ggml_tensor * mag = ggml_exp(ctx, ggml_clamp(ctx, rows(0), -std::numeric_limits<float>::infinity(),
                                                 log_max_magnitude_));
    ggml_tensor * phase = rows(n_bins);
    // spec: [2 * n_bins, T], real parts then imaginary parts
    ggml_tensor * spec = ggml_concat(ctx, ggml_mul(ctx, mag, ggml_cos(ctx, phase)),
                                     ggml_mul(ctx, mag, ggml_sin(ctx, phase)), 0);
    ggml_set_name(spec, "voc.spec");
    ggml_tensor * audio = istft_.forward(ctx, spec, opt);
    ggml_set_name(audio, "voc.audio");
    return audio;
}

}  // namespace ov
