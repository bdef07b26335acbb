#include "models/codec/encoder.h"

#include <algorithm>

#include "runtime/errors.h"

namespace ov {

namespace {

// HiggsAudioV2TokenizerModel._extract_semantic_features pads the 16 kHz signal by a fixed 160
// samples each side (not by hop_length / 2 as the original Boson AI code did).
constexpr int kSemanticPad = 160;

}  // namespace

void CodecEncoder::load(GGUFFile & file, DerivedWeights & derived, int64_t rvq_hidden) {
    const int64_t hop = file.get_u32("omnivoice.acoustic.hop_length");
    // HuBERT frames per codec frame; the reference downsamples only when it is above 1.
    semantic_downsample = std::max<int>(1, (int) file.get_u32("omnivoice.semantic.downsample_factor"));
    acoustic_pad = (int) (hop / 2);

    hubert_hp = HubertHParams::load(file);
    semantic_model = HubertWeights::load(file, derived, hubert_hp, "hubert.");
    encoder_semantic.load(file, derived, SemanticEncoderHParams::load(file, hubert_hp.n_embd), "encoder_semantic.");
    acoustic_hp = DacEncoderHParams::load(file);
    acoustic_encoder.load(file, derived, acoustic_hp, "acoustic_encoder.");
    if (acoustic_hp.hidden_size + encoder_semantic.out_channels != rvq_hidden) {
        throw ModelFormatError(file.path() + ": acoustic (" + std::to_string(acoustic_hp.hidden_size) +
                               ") plus semantic (" + std::to_string(encoder_semantic.out_channels) +
                               ") channels do not add up to the quantizer width " + std::to_string(rvq_hidden));
    }
    fc.load(file, "fc", rvq_hidden, rvq_hidden);
}

EncodePlan CodecEncoder::plan(int64_t n_samples, int64_t n_semantic_samples) const {
    EncodePlan p;
    const int64_t n_hubert = hubert_hp.n_frames(n_semantic_samples + 2 * kSemanticPad);
    if (n_samples <= 0 || n_hubert == 0) {
        throw InvalidInput("audio too short to encode: " + std::to_string(n_samples) + " samples at 24 kHz and " +
                           std::to_string(n_semantic_samples) + " at 16 kHz give no frame");
    }
    const int64_t n_kept = (n_hubert + semantic_downsample - 1) / semantic_downsample;
    const int64_t n_semantic = encoder_semantic.n_frames(n_kept);
    int64_t n_acoustic = acoustic_hp.n_frames(n_samples);
    if (n_acoustic != n_semantic) {
        p.pad_acoustic = true;
        n_acoustic = acoustic_hp.n_frames(n_samples + 2 * acoustic_pad);
    }
    if (n_acoustic != n_semantic) {
        throw InvalidInput("cannot align the streams: " + std::to_string(n_samples) + " samples at 24 kHz give " +
                           std::to_string(n_acoustic) + " acoustic frames but " + std::to_string(n_semantic_samples) +
                           " at 16 kHz give " + std::to_string(n_semantic) +
                           " semantic frames (trim the audio to a multiple of the hop length)");
    }
    p.n_frames = n_semantic;
    return p;
}

ggml_tensor * CodecEncoder::build(ggml_context * ctx, const EncodePlan & plan, ggml_tensor * wave,
                                  ggml_tensor * wave16, const GraphOptions & opt) const {
    // _extract_semantic_features: HuBERT on the padded 16 kHz signal, every n-th frame kept.
    ggml_tensor * x16 = ggml_pad_ext(ctx, wave16, kSemanticPad, kSemanticPad, 0, 0, 0, 0, 0, 0);
    ggml_tensor * hub = build_hubert(ctx, semantic_model, hubert_hp, x16);  // [C, T_hubert]
    const int64_t n_kept = (hub->ne[1] + semantic_downsample - 1) / semantic_downsample;
    ggml_tensor * sem = ggml_view_2d(ctx, hub, hub->ne[0], n_kept, hub->nb[1] * semantic_downsample, 0);
    ggml_tensor * e_semantic = encoder_semantic.forward(ctx, ggml_cont(ctx, sem));  // [C_sem, T]
    ggml_set_name(e_semantic, "e_semantic");

    // The DAC encoder, on the hop/2-padded signal when its frame count would not match.
    ggml_tensor * x24 = wave;
    if (plan.pad_acoustic) x24 = ggml_pad_ext(ctx, wave, acoustic_pad, acoustic_pad, 0, 0, 0, 0, 0, 0);
    ggml_tensor * e_acoustic = acoustic_encoder.forward(ctx, x24, opt);  // [C_ac, T]
    ggml_set_name(e_acoustic, "e_acoustic");

    // torch.cat([e_acoustic, e_semantic], dim=1), then fc over channels
    ggml_tensor * emb = ggml_concat(ctx, e_acoustic, e_semantic, 0);  // [rvq_hidden, T]
    ggml_tensor * latent = fc.forward(ctx, emb);
    ggml_set_name(latent, "fc.out");
    return latent;
}

}  // namespace ov
