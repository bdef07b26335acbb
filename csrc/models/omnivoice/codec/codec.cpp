#include "models/omnivoice/codec/codec.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime/errors.h"

namespace ov {

static const char * kArch = "omnivoice-tokenizer";
// Upper bound on load-time derived tensors (about 80 for the decoder: rearranged conv weights and
// Snake reciprocals; the encoder adds its own). Only metadata is reserved.
constexpr size_t kMaxDerivedTensors = 1024;
// Nodes of the encode graph: HuBERT's layers, both conv stacks and the RVQ loop, with room to spare.
constexpr size_t kEncodeGraphSize = 8192;

// Marks the graph intermediates named in `names` as outputs so their data survives allocation.
static std::vector<ggml_tensor *> mark_captures(ggml_cgraph * graph, const std::vector<std::string> & names,
                                                const char * what) {
    std::vector<ggml_tensor *> captured;
    for (const std::string & name : names) {
        ggml_tensor * t = ggml_graph_get_tensor(graph, name.c_str());
        // A view shares its source's memory, which the allocator may reuse: only op results qualify.
        if (!t || t->view_src || t->type != GGML_TYPE_F32) {
            throw InvalidInput("no capturable intermediate named '" + name + "' in the " + what + " graph");
        }
        ggml_set_output(t);
        captured.push_back(t);
    }
    return captured;
}

static void read_captures(const std::vector<ggml_tensor *> & captured, std::map<std::string, std::vector<float>> & data,
                          std::map<std::string, std::vector<int64_t>> & shapes) {
    for (ggml_tensor * t : captured) {
        std::vector<float> & d = data[ggml_get_name(t)];
        d.resize(ggml_nelements(t));
        ggml_backend_tensor_get(t, d.data(), 0, ggml_nbytes(t));
        shapes[ggml_get_name(t)] = std::vector<int64_t>(t->ne, t->ne + ggml_n_dims(t));
    }
}

// Sample rates a codec file may state: 1 kHz to 384 kHz (the real one: 24 kHz, HuBERT 16 kHz).
// Audio is resampled to them, so an absurd value would size absurd buffers.
constexpr uint32_t kMinRate = 1000;
constexpr uint32_t kMaxRate = 384000;

CodecHParams CodecHParams::load(const GGUFFile & file) {
    CodecHParams hp;
    hp.sample_rate = (int) file.get_u32_in("omnivoice.sample_rate", kMinRate, kMaxRate);
    hp.hop_length = (int) file.get_u32_in("omnivoice.acoustic.hop_length", 1, hp.sample_rate);
    hp.has_encoder = file.get_bool("omnivoice.has_encoder");
    // HuBERT's input rate: encode resamples to it, so an encoder file must state it.
    if (hp.has_encoder) {
        hp.semantic_sample_rate = (int) file.get_u32_in("omnivoice.semantic_sample_rate", kMinRate, kMaxRate);
    }
    hp.frame_rate = (hp.sample_rate + hp.hop_length - 1) / hp.hop_length;
    hp.rvq = RvqHParams::load(file);
    hp.decoder = DacDecoderHParams::load(file);
    return hp;
}

Codec::Codec(const std::string & path, BackendPtr backend) : backend_(std::move(backend)) {
    // Off the CPU (or when forced) every graph is built from stock ggml ops: the fast CPU path's
    // convolutions, Snake, norms and RVQ search are custom ops.
    opt_.stock_ops = backend_->stock_ops();
    file_ = std::make_unique<GGUFFile>(path, kArch, *backend_);
    hp_ = CodecHParams::load(*file_);
    derived_ = std::make_unique<DerivedWeights>(kMaxDerivedTensors, opt_.stock_ops);

    quantizer_.load(*file_, *derived_, "quantizer", hp_.rvq);
    fc2_.load(*file_, "fc2", hp_.rvq.hidden, hp_.decoder.in_channels);
    acoustic_decoder_.load(*file_, *derived_, "acoustic_decoder", hp_.decoder);
    if (hp_.has_encoder) {
        encoder_ = std::make_unique<CodecEncoder>();
        encoder_->load(*file_, *derived_, "", CodecEncoderHParams::load(*file_));
    }
    file_->check_all_consumed();

    derived_->materialize(*backend_);
    galloc_ = ggml_gallocr_new(ggml_backend_get_default_buffer_type(backend_->get()));
}

Codec::~Codec() {
    if (galloc_) ggml_gallocr_free(galloc_);
}

void Codec::check_codes(const int64_t * codes, int64_t n_q, int64_t n_frames) const {
    if (n_q != hp_.rvq.n_quantizers || n_frames < 1) {
        throw InvalidInput("codes must have shape [" + std::to_string(hp_.rvq.n_quantizers) +
                           ", T] with T >= 1, got [" + std::to_string(n_q) + ", " + std::to_string(n_frames) + "]");
    }
    for (int64_t i = 0; i < n_q * n_frames; ++i) {
        if (codes[i] < 0 || codes[i] >= hp_.rvq.codebook_size) {
            throw InvalidInput("code " + std::to_string(codes[i]) + " at codebook " + std::to_string(i / n_frames) +
                               ", frame " + std::to_string(i % n_frames) + " is outside [0, " +
                               std::to_string(hp_.rvq.codebook_size) + ")");
        }
    }
}

void Codec::set_decode_window(int64_t frames) {
    if (frames != 0 && frames <= 2 * decode_context()) {
        throw InvalidInput("decode_window must be 0 or more than " + std::to_string(2 * decode_context()) +
                           " frames (twice the decoder's context), got " + std::to_string(frames));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    decode_window_ = frames;
}

size_t Codec::compute_buffer_size() const { return ggml_gallocr_get_buffer_size(galloc_, 0); }

DecodeResult Codec::decode(const int64_t * codes, int64_t n_q, int64_t n_frames,
                           const std::vector<std::string> & capture) {
    check_codes(codes, n_q, n_frames);
    const std::vector<int32_t> ids(codes, codes + n_q * n_frames);  // in range, so exact
    std::lock_guard<std::mutex> lock(mutex_);
    if (decode_window_ == 0 || n_frames <= decode_window_ || !capture.empty()) {
        return decode_graph(ids.data(), n_q, n_frames, capture);
    }
    // Windows [lo, hi) around cores [a, b) that tile the sequence; each core's samples come from
    // a window holding its context on both sides (or the sequence edge, as in one graph).
    const int64_t context = decode_context();
    const int64_t core = decode_window_ - 2 * context;
    const int64_t hop = hp_.hop_length;
    DecodeResult out;
    out.audio.resize(n_frames * hop);
    std::vector<int32_t> window;
    for (int64_t a = 0; a < n_frames; a += core) {
        const int64_t b = std::min(n_frames, a + core);
        const int64_t lo = std::max<int64_t>(0, a - context), hi = std::min(n_frames, b + context);
        window.resize(n_q * (hi - lo));
        for (int64_t q = 0; q < n_q; ++q) {
            std::copy(ids.begin() + q * n_frames + lo, ids.begin() + q * n_frames + hi, window.begin() + q * (hi - lo));
        }
        const DecodeResult part = decode_graph(window.data(), n_q, hi - lo, {});
        std::copy(part.audio.begin() + (a - lo) * hop, part.audio.begin() + (b - lo) * hop, out.audio.begin() + a * hop);
    }
    return out;
}

DecodeResult Codec::decode_graph(const int32_t * codes, int64_t n_q, int64_t n_frames,
                                 const std::vector<std::string> & capture) {
    const size_t meta_size = ggml_tensor_overhead() * GGML_DEFAULT_GRAPH_SIZE + ggml_graph_overhead();
    ggml_init_params params = {meta_size, nullptr, /*no_alloc =*/true};
    std::unique_ptr<ggml_context, decltype(&ggml_free)> ctx(ggml_init(params), ggml_free);
    if (!ctx) throw std::runtime_error("ggml_init failed for the decode graph");

    // HiggsAudioV2TokenizerModel.decode
    // codes: [T, n_q]
    ggml_tensor * codes_in = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_I32, n_frames, n_q);
    ggml_set_name(codes_in, "codes");
    ggml_set_input(codes_in);
    // quantized: [rvq_hidden, T]
    ggml_tensor * quantized = quantizer_.decode(ctx.get(), codes_in, opt_);
    // acoustic: [acoustic_hidden, T]
    ggml_tensor * acoustic = fc2_.forward(ctx.get(), quantized);
    ggml_set_name(acoustic, "fc2.out");
    // audio: [1, T * hop_length]
    ggml_tensor * audio = acoustic_decoder_.forward(ctx.get(), acoustic, opt_);
    ggml_set_output(audio);

    ggml_cgraph * graph = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(graph, audio);
    const std::vector<ggml_tensor *> captured = mark_captures(graph, capture, "decode");
    if (!ggml_gallocr_alloc_graph(galloc_, graph)) {
        throw std::runtime_error("cannot allocate the decode graph (" + std::to_string(n_frames) + " frames)");
    }
    ggml_backend_tensor_set(codes_in, codes, 0, ggml_nbytes(codes_in));
    backend_->compute(graph);

    DecodeResult out;
    out.audio.resize(ggml_nelements(audio));
    ggml_backend_tensor_get(audio, out.audio.data(), 0, ggml_nbytes(audio));
    read_captures(captured, out.captured, out.captured_shape);
    return out;
}

EncodeResult Codec::encode(const float * wave, int64_t n_samples, const float * wave16, int64_t n_samples16,
                           const std::vector<std::string> & capture) {
    if (!encoder_) {
        throw InvalidInput(file_->path() + " has no encoder (converted with --no-encoder); it can only decode");
    }
    const EncodePlan plan = encoder_->plan(n_samples, n_samples16);
    std::lock_guard<std::mutex> lock(mutex_);

    const size_t meta_size =
        ggml_tensor_overhead() * kEncodeGraphSize + ggml_graph_overhead_custom(kEncodeGraphSize, false);
    ggml_init_params params = {meta_size, nullptr, /*no_alloc =*/true};
    std::unique_ptr<ggml_context, decltype(&ggml_free)> ctx(ggml_init(params), ggml_free);
    if (!ctx) throw std::runtime_error("ggml_init failed for the encode graph");

    // wave: [n_samples] at 24 kHz, wave16: [n_samples16] at 16 kHz
    ggml_tensor * wave_in = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, n_samples);
    ggml_set_name(wave_in, "wave");
    ggml_set_input(wave_in);
    ggml_tensor * wave16_in = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, n_samples16);
    ggml_set_name(wave16_in, "wave16");
    ggml_set_input(wave16_in);
    // latent: [rvq_hidden, T]; codes: [T, n_q]
    ggml_tensor * latent = encoder_->forward(ctx.get(), wave_in, wave16_in, plan, opt_);
    ggml_tensor * codes = quantizer_.encode(ctx.get(), latent, opt_);
    ggml_set_output(codes);

    ggml_cgraph * graph = ggml_new_graph_custom(ctx.get(), kEncodeGraphSize, false);
    ggml_build_forward_expand(graph, codes);
    const std::vector<ggml_tensor *> captured = mark_captures(graph, capture, "encode");
    if (!ggml_gallocr_alloc_graph(galloc_, graph)) {
        throw std::runtime_error("cannot allocate the encode graph (" + std::to_string(n_samples) + " samples)");
    }
    ggml_backend_tensor_set(wave_in, wave, 0, ggml_nbytes(wave_in));
    ggml_backend_tensor_set(wave16_in, wave16, 0, ggml_nbytes(wave16_in));
    backend_->compute(graph);

    EncodeResult out;
    out.n_frames = plan.n_frames;
    out.codes.resize(ggml_nelements(codes));
    ggml_backend_tensor_get(codes, out.codes.data(), 0, ggml_nbytes(codes));
    read_captures(captured, out.captured, out.captured_shape);
    return out;
}

}  // namespace ov
