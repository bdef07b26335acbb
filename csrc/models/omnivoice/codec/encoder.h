#pragma once
// The encode half of HiggsAudioV2TokenizerModel: HuBERT features of the 16 kHz signal through
// the SemanticEncoder, the DAC encoder over the 24 kHz signal, both streams joined and projected
// by `fc`, then residual vector quantisation. Loaded only from GGUFs with omnivoice.has_encoder.
#include <cstdint>
#include <string>
#include <vector>

#include "ggml.h"
#include "models/omnivoice/codec/dac_encoder.h"
#include "models/omnivoice/codec/hubert.h"
#include "models/omnivoice/codec/semantic_encoder.h"
#include "nn/layers.h"
#include "runtime/gguf_file.h"

namespace ov {

// Sizes of one encode call, fixed before its graph is built.
struct EncodePlan {
    int64_t n_frames = 0;       // codes per codebook
    bool pad_acoustic = false;  // the reference's hop/2 padding of the 24 kHz input
};

struct CodecEncoderHParams {
    HubertHParams hubert;
    SemanticEncoderHParams semantic;
    DacEncoderHParams acoustic;
    int64_t rvq_hidden = 0;       // fc's width, the quantizers' space: acoustic + semantic hidden sizes
    int hop_length = 0;           // 24 kHz samples per codec frame (960)
    int semantic_downsample = 1;  // keep every n-th HuBERT frame
    int acoustic_pad = 0;         // hop_length / 2

    static CodecEncoderHParams load(const GGUFFile & file);
};

struct CodecEncoder {
    CodecEncoderHParams hp;
    HubertModel semantic_model;  // stored as hubert.*
    SemanticEncoder encoder_semantic;
    DacEncoder acoustic_encoder;
    Linear fc;

    // Loads HuBERT, both encoders and fc under `prefix` ("" in the tokenizer GGUF).
    void load(GGUFFile & file, DerivedWeights & derived, const std::string & prefix, const CodecEncoderHParams & hp);

    // Checks the lengths and decides the acoustic padding as the reference does; throws
    // InvalidInput when the input is too short or the two streams cannot be aligned.
    EncodePlan plan(int64_t n_samples, int64_t n_semantic_samples) const;

    // wave: [n_samples] 24 kHz, wave16: [n_semantic_samples] 16 kHz, as given to plan().
    // Returns the pre-quantisation latent [rvq_hidden, n_frames]; the HuBERT output [C, T_hubert]
    // is named "hubert.out".
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * wave, ggml_tensor * wave16, const EncodePlan & plan,
                          const GraphOptions & opt) const;
};

}  // namespace ov
