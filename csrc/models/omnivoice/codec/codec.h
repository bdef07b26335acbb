#pragma once
// HiggsAudioV2TokenizerModel: the audio tokenizer, loaded from an `omnivoice-tokenizer` GGUF.
// decode: codes [n_q, T] -> 24 kHz audio of T * hop_length samples.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "models/omnivoice/codec/dac_decoder.h"
#include "models/omnivoice/codec/encoder.h"
#include "models/omnivoice/codec/rvq.h"
#include "nn/layers.h"
#include "runtime/backend.h"
#include "runtime/gguf_file.h"

namespace ov {

struct CodecHParams {
    int sample_rate = 0;        // 24000
    int semantic_sample_rate = 0;  // 16000, HuBERT's input (0 without the encoder)
    int hop_length = 0;         // 960 audio samples per frame
    int frame_rate = 0;         // ceil(sample_rate / hop_length) = 25
    bool has_encoder = false;   // the encode half is stored (omnivoice.has_encoder)
    RvqHParams rvq;             // codebooks: their count, size and the quantizers' width
    DacDecoderHParams decoder;  // in_channels: fc2's output (256)

    static CodecHParams load(const GGUFFile & file);
};

// Output of one decode: the audio, plus any intermediates asked for by name.
struct DecodeResult {
    std::vector<float> audio;
    std::map<std::string, std::vector<float>> captured;
    std::map<std::string, std::vector<int64_t>> captured_shape;  // ggml ne order
};

// Output of one encode: codes row-major [n_quantizers, n_frames], plus captured intermediates.
struct EncodeResult {
    std::vector<int32_t> codes;
    int64_t n_frames = 0;
    std::map<std::string, std::vector<float>> captured;
    std::map<std::string, std::vector<int64_t>> captured_shape;  // ggml ne order
};

class Codec {
public:
    // Loads `path`; runs on `backend` if it is the CPU, else on a CPU backend of its own.
    Codec(const std::string & path, BackendPtr backend);
    ~Codec();
    Codec(const Codec &) = delete;
    Codec & operator=(const Codec &) = delete;

    const CodecHParams & hparams() const { return hp_; }
    const GGUFFile & file() const { return *file_; }
    const BackendPtr & backend() const { return backend_; }

    // Use the fused Snake op (default), or the composed form of stock ggml ops (always taken
    // with stock ops).
    void set_fused_snake(bool fused) { opt_.fused_snake = fused; }
    bool fused_snake() const { return opt_.fused_snake && !opt_.stock_ops; }
    // Whether the graphs use stock ggml ops only (the backend's stock_ops()).
    bool stock_ops() const { return opt_.stock_ops; }

    // codes: n_q rows of T ids (row-major [n_q, T]) -> T * hop_length samples. `capture` names
    // graph intermediates (e.g. "rvq.sum", "fc2.out", "dec.blk2.res1.out") to copy out as well.
    // More than decode_window() frames (and no capture) decode in overlapping windows of at most
    // that many frames, each overlapping its neighbours by the decoder's context: memory stays
    // bounded whatever T, and the output is the one-graph decode's.
    DecodeResult decode(const int64_t * codes, int64_t n_q, int64_t n_frames,
                        const std::vector<std::string> & capture = {});

    // Frames per decode graph at most; 0 decodes any length in one graph. Must exceed twice the
    // decoder's context (decode_context()).
    int64_t decode_window() const { return decode_window_; }
    void set_decode_window(int64_t frames);
    int64_t decode_context() const { return acoustic_decoder_.context_frames(); }
    // Bytes of the compute buffer (the largest graph so far).
    size_t compute_buffer_size() const;

    // HiggsAudioV2TokenizerModel.encode of one mono signal given at both rates: `wave` at
    // sample_rate (24 kHz) for the acoustic stream and `wave16` at the semantic rate (16 kHz) for
    // HuBERT. `capture` as for decode (e.g. "hubert.out", "e_semantic", "e_acoustic", "fc.out").
    // Throws InvalidInput when the file has no encoder or the audio is too short.
    EncodeResult encode(const float * wave, int64_t n_samples, const float * wave16, int64_t n_samples16,
                        const std::vector<std::string> & capture = {});

private:
    // Throws InvalidInput unless codes is [n_quantizers, T >= 1] with ids in [0, codebook_size):
    // the one check of codes, whoever calls.
    void check_codes(const int64_t * codes, int64_t n_q, int64_t n_frames) const;
    // One decode graph over all n_frames of checked codes (row-major [n_q, n_frames]).
    DecodeResult decode_graph(const int32_t * codes, int64_t n_q, int64_t n_frames,
                              const std::vector<std::string> & capture);

    BackendPtr backend_;
    std::unique_ptr<GGUFFile> file_;
    std::unique_ptr<DerivedWeights> derived_;
    CodecHParams hp_;
    GraphOptions opt_;

    ResidualVectorQuantizer quantizer_;
    Linear fc2_;  // rvq.hidden -> decoder.in_channels
    DacDecoder acoustic_decoder_;
    std::unique_ptr<CodecEncoder> encoder_;  // null without omnivoice.has_encoder

    // 10 s of audio per graph (about 230 MB of F32 activations on the CPU path).
    int64_t decode_window_ = 250;
    std::mutex mutex_;  // one graph at a time: the allocator below is shared
    ggml_gallocr_t galloc_ = nullptr;
};

}  // namespace ov
