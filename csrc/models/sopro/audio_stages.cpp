#include "models/sopro/audio_stages.h"

#include <cmath>

#include "runtime/errors.h"

namespace ov {

static const char * kArch = "sopro-tts";
// Upper bound on load-time derived tensors (rearranged conv weights, the ISTFT tables); only
// metadata is reserved.
constexpr size_t kMaxDerivedTensors = 1024;

// Reads one front end's window [win_length] and filterbank (n_fft/2+1, n_mels) to the host.
static FrontendTables read_frontend(GGUFFile & file, const std::string & prefix, int64_t win_length, int64_t n_fft,
                                    int64_t n_mels) {
    FrontendTables t;
    ggml_tensor * window = file.tensor(join_name(prefix, "spectrogram.window"), {win_length}, {GGML_TYPE_F32});
    ggml_tensor * fb = file.tensor(join_name(prefix, "mel_scale.fb"), {n_mels, n_fft / 2 + 1}, {GGML_TYPE_F32});
    t.window.resize(win_length);
    ggml_backend_tensor_get(window, t.window.data(), 0, ggml_nbytes(window));
    t.fb.resize(ggml_nelements(fb));
    ggml_backend_tensor_get(fb, t.fb.data(), 0, ggml_nbytes(fb));
    t.n_mels = n_mels;
    return t;
}

SoproAudioStages::SoproAudioStages(const std::string & path, BackendPtr backend) : backend_(std::move(backend)) {
    opt_.stock_ops = backend_->stock_ops();
    file_ = std::make_unique<GGUFFile>(path, kArch, *backend_);
    derived_ = std::make_unique<DerivedWeights>(kMaxDerivedTensors, opt_.stock_ops);
    const VocoderHParams vhp = VocoderHParams::load(*file_);
    vocoder_.load(*file_, *derived_, "vocoder", vhp, !opt_.stock_ops);
    frontends_["vocoder"] = read_frontend(*file_, "vocoder.feature_extractor.mel_spec", vhp.n_fft, vhp.n_fft, vhp.n_mels);
    file_->check_all_consumed({"vocoder."});
    derived_->materialize(*backend_);
    galloc_ = ggml_gallocr_new(ggml_backend_get_default_buffer_type(backend_->get()));
}

SoproAudioStages::~SoproAudioStages() {
    if (galloc_) ggml_gallocr_free(galloc_);
}

const FrontendTables & SoproAudioStages::frontend(const std::string & name) const {
    const auto it = frontends_.find(name);
    if (it == frontends_.end()) throw InvalidInput("no front end named '" + name + "' (vocoder)");
    return it->second;
}

// Marks the graph intermediates named in `names` as outputs so their data survives allocation.
static std::vector<ggml_tensor *> mark_captures(ggml_cgraph * graph, const std::vector<std::string> & names) {
    std::vector<ggml_tensor *> captured;
    for (const std::string & name : names) {
        ggml_tensor * t = ggml_graph_get_tensor(graph, name.c_str());
        // A view shares its source's memory, which the allocator may reuse: only op results qualify.
        if (!t || t->view_src || t->type != GGML_TYPE_F32) {
            throw InvalidInput("no capturable intermediate named '" + name + "' in the graph");
        }
        ggml_set_output(t);
        captured.push_back(t);
    }
    return captured;
}

StageResult SoproAudioStages::vocode(const float * mel, int64_t n_mels, int64_t n_frames,
                                     const std::vector<std::string> & capture) {
    const VocoderHParams & hp = vocoder_.hparams();
    if (n_mels != hp.n_mels || n_frames < 2) {
        throw InvalidInput("mel must have shape [" + std::to_string(hp.n_mels) + ", T] with T >= 2 frames, got [" +
                           std::to_string(n_mels) + ", " + std::to_string(n_frames) + "]");
    }
    for (int64_t i = 0; i < n_mels * n_frames; ++i) {
        if (!std::isfinite(mel[i])) throw InvalidInput("mel holds a non-finite value at index " + std::to_string(i));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t meta_size = ggml_tensor_overhead() * GGML_DEFAULT_GRAPH_SIZE + ggml_graph_overhead();
    ggml_init_params params = {meta_size, nullptr, /*no_alloc =*/true};
    std::unique_ptr<ggml_context, decltype(&ggml_free)> ctx(ggml_init(params), ggml_free);
    if (!ctx) throw std::runtime_error("ggml_init failed for the vocoder graph");
    // mel_in: [n_mels, T]
    ggml_tensor * mel_in = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, n_mels, n_frames);
    ggml_set_name(mel_in, "mel");
    ggml_set_input(mel_in);
    ggml_tensor * audio = vocoder_.forward(ctx.get(), mel_in, opt_);
    ggml_set_output(audio);
    ggml_cgraph * graph = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(graph, audio);
    const std::vector<ggml_tensor *> captured = mark_captures(graph, capture);
    if (!ggml_gallocr_alloc_graph(galloc_, graph)) {
        throw std::runtime_error("cannot allocate the vocoder graph (" + std::to_string(n_frames) + " frames)");
    }
    ggml_backend_tensor_set(mel_in, mel, 0, ggml_nbytes(mel_in));
    backend_->compute(graph);
    StageResult out;
    out.data.resize(ggml_nelements(audio));
    ggml_backend_tensor_get(audio, out.data.data(), 0, ggml_nbytes(audio));
    out.ne = {audio->ne[0]};
    for (ggml_tensor * t : captured) {
        std::vector<float> & d = out.captured[ggml_get_name(t)];
        d.resize(ggml_nelements(t));
        ggml_backend_tensor_get(t, d.data(), 0, ggml_nbytes(t));
        out.captured_shape[ggml_get_name(t)] = std::vector<int64_t>(t->ne, t->ne + ggml_n_dims(t));
    }
    return out;
}

}  // namespace ov
