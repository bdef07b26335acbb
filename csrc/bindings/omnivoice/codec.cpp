// Python surface of the audio tokenizer: _core.Codec.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings/arrays.h"
#include "bindings/registry.h"
#include "models/omnivoice/codec/codec.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace {

void bind_codec(py::module_ & m) {
    py::class_<ov::Codec, std::shared_ptr<ov::Codec>>(m, "Codec",
                                                       "The Higgs Audio v2 audio tokenizer, loaded from an "
                                                       "omnivoice-tokenizer GGUF.")
        .def(py::init([](const std::string & path, const ov::BackendPtr & backend) {
                 return std::make_shared<ov::Codec>(path, backend);
             }),
             "path"_a, "backend"_a)
        .def_property_readonly("metadata", [](const ov::Codec & c) { return ov::metadata_dict(c.file()); })
        .def_property_readonly("sample_rate", [](const ov::Codec & c) { return c.hparams().sample_rate; })
        .def_property_readonly("semantic_sample_rate",
                               [](const ov::Codec & c) { return c.hparams().semantic_sample_rate; })
        .def_property_readonly("hop_length", [](const ov::Codec & c) { return c.hparams().hop_length; })
        .def_property_readonly("frame_rate", [](const ov::Codec & c) { return c.hparams().frame_rate; })
        .def_property_readonly("n_codebooks", [](const ov::Codec & c) { return c.hparams().rvq.n_quantizers; })
        .def_property_readonly("codebook_size", [](const ov::Codec & c) { return c.hparams().rvq.codebook_size; })
        .def_property_readonly("has_encoder", [](const ov::Codec & c) { return c.hparams().has_encoder; })
        .def_property("fused_snake", &ov::Codec::fused_snake, &ov::Codec::set_fused_snake,
                      "Use the fused Snake op (default), or the composed form of stock ggml ops (always "
                      "with stock_ops).")
        .def_property("decode_window", &ov::Codec::decode_window, &ov::Codec::set_decode_window,
                      "Frames per decode graph at most (default 250, 10 s): longer code sequences decode in "
                      "windows overlapping by decode_context frames each side, with the one-graph output. "
                      "0 decodes any length in one graph.")
        .def_property_readonly("decode_context", &ov::Codec::decode_context,
                               "Code frames each side an output frame depends on (the windows' overlap).")
        .def_property_readonly("compute_buffer_size", &ov::Codec::compute_buffer_size,
                               "Bytes of the compute buffer (grown to the largest graph run so far).")
        .def_property_readonly("stock_ops", &ov::Codec::stock_ops,
                               "Whether the graphs use stock ggml ops only (the backend's stock_ops).")
        .def(
            "decode",
            [](ov::Codec & c, const py::array & codes) {
                auto ids = ov::codes_from_python(codes);
                ov::DecodeResult r;
                {
                    py::gil_scoped_release release;
                    r = c.decode(ids.data(), ids.shape(0), ids.shape(1));
                }
                const int64_t n = (int64_t) r.audio.size();
                return ov::to_numpy(std::move(r.audio), {n});
            },
            "codes"_a, "codes: int array [n_codebooks, T] -> float32 audio [T * hop_length].")
        .def(
            "encode",
            [](ov::Codec & c, const py::array & wave, const py::array & wave16) {
                auto w = ov::wave_from_python(wave, "wave");
                auto w16 = ov::wave_from_python(wave16, "wave16");
                ov::EncodeResult r;
                {
                    py::gil_scoped_release release;
                    r = c.encode(w.data(), w.size(), w16.data(), w16.size());
                }
                return ov::codes_to_numpy(r.codes, r.n_frames);
            },
            "wave"_a, "wave16"_a,
            "HiggsAudioV2TokenizerModel.encode of one mono signal given at both rates: wave float32 [N] at "
            "sample_rate (24 kHz), wave16 float32 [M] at 16 kHz -> int32 codes [n_codebooks, T].");
}

const ov::Binding reg(&bind_codec);

}  // namespace
