#pragma once
// The encode half of HiggsAudioV2TokenizerModel: HuBERT features of the 16 kHz signal through
// the SemanticEncoder, the DAC encoder over the 24 kHz signal, both streams joined and projected
// by `fc`, then residual vector quantisation. Loaded only from GGUFs with omnivoice.has_encoder.
#include <cstdint>
#include <string>
#include <vector>

#include "ggml.h"
#include "models/codec/dac_encoder.h"
#include "models/codec/hubert.h"
#include "models/codec/semantic_encoder.h"
#include "nn/layers.h"
#include "runtime/gguf_file.h"

namespace ov {

// Sizes of one encode call, fixed before its graph is built.
struct EncodePlan {
    int64_t n_frames = 0;       // codes per codebook
    bool pad_acoustic = false;  // the reference's hop/2 padding of the 24 kHz input
};

struct CodecEncoder {
    HubertHParams hubert_hp;
    HubertWeights semantic_model;  // stored as hubert.*
    SemanticEncoder encoder_semantic;
    DacEncoderHParams acoustic_hp;
    DacEncoder acoustic_encoder;
    Linear fc;
    int semantic_downsample = 1;  // keep every n-th HuBERT frame
    int acoustic_pad = 0;         // hop_length / 2

    // Loads HuBERT, both encoders and fc; rvq_hidden is the quantizers' width (acoustic + semantic).
    void load(GGUFFile & file, DerivedWeights & derived, int64_t rvq_hidden);

    // Checks the lengths and decides the acoustic padding as the reference does; throws
    // InvalidInput when the input is too short or the two streams cannot be aligned.
    EncodePlan plan(int64_t n_samples, int64_t n_semantic_samples) const;

    // wave: [n_samples] 24 kHz, wave16: [n_semantic_samples] 16 kHz, as given to plan().
    // Returns the pre-quantisation latent [rvq_hidden, n_frames]; the HuBERT output [C, T_hubert]
    // is named "hubert.out".
    ggml_tensor * build(ggml_context * ctx, const EncodePlan & plan, ggml_tensor * wave, ggml_tensor * wave16,
                        const GraphOptions & opt) const;
};

}  // namespace ov
