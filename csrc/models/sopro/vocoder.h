#pragma once
// Sopro's vocoder (sopro/vocoder.py, Vocos): log-mel [n_mels, T] -> backbone (Conv k7, LayerNorm,
// ConvNeXt blocks of depthwise k7, LayerNorm) -> Linear to n_fft + 2 -> magnitude and phase ->
// ISTFT -> (T-1) * hop samples at 24 kHz. Offline only; the streaming form keeps conv tails.
#include <string>
#include <vector>

#include "nn/layers.h"
#include "runtime/gguf_file.h"

namespace ov {

struct VocoderHParams {
    int n_mels = 0;            // 100
    int dim = 0;               // 512
    int intermediate_dim = 0;  // 1536
    int n_layers = 0;          // 8 ConvNeXt blocks
    int n_fft = 0;             // 1024
    int hop = 0;               // 256
    float max_magnitude = 0;   // 100: the spectrum's magnitude is exp(min(x, ln max_magnitude))
    // Lookahead (right padding) of the 7-tap convs, the embed's then each block's; the rest of the
    // 6 frames of context pad the left. Upstream's causal: false pads (3, 3), i.e. lookahead 3.
    int embed_lookahead = 0;
    std::vector<int> block_lookaheads;

    static VocoderHParams load(const GGUFFile & file);
};

// ConvNeXtBlock: x + gamma * pwconv2(GELU(pwconv1(LN(dwconv(x)))))
struct VocoderBlock {
    GroupedConv1d dwconv;  // depthwise, 7 taps
    LayerNorm norm;
    Linear pwconv1, pwconv2;
    ggml_tensor * gamma = nullptr;  // [dim]

    void load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, const VocoderHParams & hp,
              int lookahead, bool allow_packed);
    // x: [dim, T] -> [dim, T]
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * x, const GraphOptions & opt) const;
};

class Vocoder {
public:
    void load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, const VocoderHParams & hp,
              bool allow_packed);
    const VocoderHParams & hparams() const { return hp_; }

    // Backbone: mel [n_mels, T] -> [dim, T] (upstream's Backbone output, transposed).
    ggml_tensor * backbone(ggml_context * ctx, ggml_tensor * mel, const GraphOptions & opt) const;
    // Vocoder.decode: mel [n_mels, T >= 2] -> audio [(T-1) * hop]
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * mel, const GraphOptions & opt) const;

private:
    VocoderHParams hp_;
    GroupedConv1d embed_;
    LayerNorm norm_, final_norm_;
    std::vector<VocoderBlock> blocks_;
    Linear out_;  // head.out: dim -> n_fft + 2 (magnitudes of n_fft/2+1 bins, then phases)
    Istft istft_;
    float log_max_magnitude_ = 0.0f;
};

}  // namespace ov
