#include "models/omnivoice/codec/encoder.h"

#include <algorithm>

#include "runtime/errors.h"

namespace ov {

namespace {

// HiggsAudioV2TokenizerModel._extract_semantic_features pads the 16 kHz signal by a fixed 160
// samples each side (not by hop_length / 2 as the original Boson AI code did).
constexpr int kSemanticPad = 160;

}  // namespace

CodecEncoderHParams CodecEncoderHParams::load(const GGUFFile & file) {
    CodecEncoderHParams hp;
    hp.hubert = HubertHParams::load(file);
    hp.semantic = SemanticEncoderHParams::load(file);
    hp.acoustic = DacEncoderHParams::load(file);
    hp.rvq_hidden = hp.acoustic.hidden_size + hp.hubert.n_embd;
    // HuBERT frames per codec frame; the reference downsamples only when it is above 1.
    hp.semantic_downsample = std::max<int>(1, (int) file.get_u32("omnivoice.semantic.downsample_factor"));
    hp.hop_length = (int) file.get_u32("omnivoice.acoustic.hop_length");
    hp.acoustic_pad = hp.hop_length / 2;
    if (hp.acoustic.hidden_size + hp.semantic.out_channels() != hp.rvq_hidden) {
        throw ModelFormatError(file.path() + ": acoustic (" + std::to_string(hp.acoustic.hidden_size) +
                               ") plus semantic (" + std::to_string(hp.semantic.out_channels()) +
                               ") channels do not add up to the quantizer width " + std::to_string(hp.rvq_hidden));
    }
    return hp;
}

void CodecEncoder::load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix,
                        const CodecEncoderHParams & hparams) {
    hp = hparams;
    semantic_model.load(file, derived, join_name(prefix, "hubert"), hp.hubert);
    encoder_semantic.load(file, derived, join_name(prefix, "encoder_semantic"), hp.semantic);
    acoustic_encoder.load(file, derived, join_name(prefix, "acoustic_encoder"), hp.acoustic);
    fc.load(file, join_name(prefix, "fc"), hp.rvq_hidden, hp.rvq_hidden);
}

EncodePlan CodecEncoder::plan(int64_t n_samples, int64_t n_semantic_samples) const {
    EncodePlan p;
    const int64_t n_hubert = hp.hubert.n_frames(n_semantic_samples + 2 * kSemanticPad);
    if (n_samples < hp.hop_length || n_hubert == 0) {
        throw InvalidInput("audio too short to encode: " + std::to_string(n_samples) + " samples at 24 kHz and " +
                           std::to_string(n_semantic_samples) + " at 16 kHz, one codec frame needs " +
                           std::to_string(hp.hop_length) + " at 24 kHz");
    }
    const int64_t n_kept = (n_hubert + hp.semantic_downsample - 1) / hp.semantic_downsample;
    const int64_t n_semantic = encoder_semantic.n_frames(n_kept);
    int64_t n_acoustic = hp.acoustic.n_frames(n_samples);
    if (n_acoustic != n_semantic) {
        p.pad_acoustic = true;
        n_acoustic = hp.acoustic.n_frames(n_samples + 2 * hp.acoustic_pad);
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

ggml_tensor * CodecEncoder::forward(ggml_context * ctx, ggml_tensor * wave, ggml_tensor * wave16,
                                    const EncodePlan & plan, const GraphOptions & opt) const {
    // _extract_semantic_features: HuBERT on the padded 16 kHz signal, every n-th frame kept.
    ggml_tensor * x16 = ggml_pad_ext(ctx, wave16, kSemanticPad, kSemanticPad, 0, 0, 0, 0, 0, 0);
    ggml_tensor * hub = semantic_model.forward(ctx, x16, opt);  // [C, T_hubert]
    const int64_t n_kept = (hub->ne[1] + hp.semantic_downsample - 1) / hp.semantic_downsample;
    ggml_tensor * sem = ggml_view_2d(ctx, hub, hub->ne[0], n_kept, hub->nb[1] * hp.semantic_downsample, 0);
    ggml_tensor * e_semantic = encoder_semantic.forward(ctx, ggml_cont(ctx, sem), opt);  // [C_sem, T]
    ggml_set_name(e_semantic, "e_semantic");

    // The DAC encoder, on the hop/2-padded signal when its frame count would not match.
    ggml_tensor * x24 = wave;
    if (plan.pad_acoustic) x24 = ggml_pad_ext(ctx, wave, hp.acoustic_pad, hp.acoustic_pad, 0, 0, 0, 0, 0, 0);
    ggml_tensor * e_acoustic = acoustic_encoder.forward(ctx, x24, opt);  // [C_ac, T]
    ggml_set_name(e_acoustic, "e_acoustic");

    // torch.cat([e_acoustic, e_semantic], dim=1), then fc over channels
    ggml_tensor * emb = ggml_concat(ctx, e_acoustic, e_semantic, 0);  // [rvq_hidden, T]
    ggml_tensor * latent = fc.forward(ctx, emb);
    ggml_set_name(latent, "fc.out");
    return latent;
}

}  // namespace ov
