#pragma once
// Sopro's audio stages loaded from a `sopro-tts` GGUF: the vocoder (and the front ends' tables,
// which the numpy front ends read through it). Each call builds one graph and runs it on the
// backend; the LM lives in its own class on the same file format.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "models/sopro/vocoder.h"
#include "nn/layers.h"
#include "runtime/backend.h"
#include "runtime/gguf_file.h"

namespace ov {

// Output of one stage graph: its result (ggml shape `ne`), plus intermediates asked for by name.
struct StageResult {
    std::vector<float> data;
    std::vector<int64_t> ne;
    std::map<std::string, std::vector<float>> captured;
    std::map<std::string, std::vector<int64_t>> captured_shape;  // ggml ne order
};

// One front end's STFT window and mel filterbank, F32 as the file stores them.
struct FrontendTables {
    std::vector<float> window;  // [win_length]
    std::vector<float> fb;      // [n_fft/2+1, n_mels], row-major as PyTorch holds it
    int64_t n_mels = 0;
};

class SoproAudioStages {
public:
    // Loads the audio stages of `path` (arch sopro-tts) on `backend`; every tensor under their
    // prefixes must be consumed.
    SoproAudioStages(const std::string & path, BackendPtr backend);
    ~SoproAudioStages();
    SoproAudioStages(const SoproAudioStages &) = delete;
    SoproAudioStages & operator=(const SoproAudioStages &) = delete;

    const GGUFFile & file() const { return *file_; }
    const VocoderHParams & vocoder_hparams() const { return vocoder_.hparams(); }
    bool stock_ops() const { return opt_.stock_ops; }
    // "speaker", "semantic" or "vocoder".
    const FrontendTables & frontend(const std::string & name) const;

    // Vocoder.decode: mel [n_mels, T] in ggml order (T rows of n_mels), T >= 2 -> (T-1) * hop
    // samples. `capture` names intermediates ("voc.backbone", "voc.spec", "voc.blk0", ...).
    StageResult vocode(const float * mel, int64_t n_mels, int64_t n_frames, const std::vector<std::string> & capture = {});

private:
    BackendPtr backend_;
    std::unique_ptr<GGUFFile> file_;
    std::unique_ptr<DerivedWeights> derived_;
    GraphOptions opt_;
    Vocoder vocoder_;
    std::map<std::string, FrontendTables> frontends_;

    std::mutex mutex_;  // one graph at a time: the allocator is shared
    ggml_gallocr_t galloc_ = nullptr;
};

}  // namespace ov
