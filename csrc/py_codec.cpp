// Python surface of the audio tokenizer: _core.Codec.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>

#include "bindings.h"
#include "codec.h"
#include "errors.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace {

// Validates `codes` as an integer array [n_codebooks, T >= 1] with ids in range and returns it
// as contiguous int32, row-major.
std::vector<int32_t> codes_from_python(const ov::Codec & codec, const py::array & codes) {
    const ov::CodecHParams & hp = codec.hparams();
    const char kind = codes.dtype().kind();
    if (kind != 'i' && kind != 'u') {
        throw ov::InvalidInput("codes must be an integer array, got dtype " + std::string(py::str(codes.dtype())));
    }
    if (codes.ndim() != 2 || codes.shape(0) != hp.n_quantizers || codes.shape(1) < 1) {
        std::string shape;
        for (py::ssize_t i = 0; i < codes.ndim(); ++i) shape += (i ? ", " : "") + std::to_string(codes.shape(i));
        throw ov::InvalidInput("codes must have shape [" + std::to_string(hp.n_quantizers) + ", T] with T >= 1, got [" +
                               shape + "]");
    }
    // Range-check in 64 bits so that large values are not wrapped by the narrowing below.
    auto wide = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(codes);
    const int64_t * p = wide.data();
    std::vector<int32_t> out((size_t) wide.size());
    for (size_t i = 0; i < out.size(); ++i) {
        if (p[i] < 0 || p[i] >= hp.codebook_size) {
            throw ov::InvalidInput("code " + std::to_string(p[i]) + " at codebook " +
                                   std::to_string(i / codes.shape(1)) + ", frame " +
                                   std::to_string(i % codes.shape(1)) + " is outside [0, " +
                                   std::to_string(hp.codebook_size) + ")");
        }
        out[i] = (int32_t) p[i];
    }
    return out;
}

// Validates a 1-D real array of finite samples and returns it as contiguous float32.
py::array_t<float, py::array::c_style> wave_from_python(const py::array & wave, const char * what) {
    const char kind = wave.dtype().kind();
    if (kind != 'f' && kind != 'i' && kind != 'u') {
        throw ov::InvalidInput(std::string(what) + " must be a real-valued array, got dtype " +
                               std::string(py::str(wave.dtype())));
    }
    if (wave.ndim() != 1) {
        throw ov::InvalidInput(std::string(what) + " must be 1-D (mono samples), got " + std::to_string(wave.ndim()) +
                               " dimensions");
    }
    auto out = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(wave);
    const float * p = out.data();
    for (py::ssize_t i = 0; i < out.size(); ++i) {
        if (!std::isfinite(p[i])) {
            throw ov::InvalidInput(std::string(what) + " has a non-finite sample (NaN or inf) at index " +
                                   std::to_string(i));
        }
    }
    return out;
}

py::array_t<float> to_numpy(std::vector<float> && data, const std::vector<int64_t> & ne) {
    // ggml's ne is innermost first: numpy's shape is its reverse.
    std::vector<py::ssize_t> shape(ne.rbegin(), ne.rend());
    auto * owned = new std::vector<float>(std::move(data));
    py::capsule free_when_done(owned, [](void * v) { delete (std::vector<float> *) v; });
    return py::array_t<float>(shape, owned->data(), free_when_done);
}

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
        .def_property_readonly("hop_length", [](const ov::Codec & c) { return c.hparams().hop_length; })
        .def_property_readonly("frame_rate", [](const ov::Codec & c) { return c.hparams().frame_rate; })
        .def_property_readonly("n_codebooks", [](const ov::Codec & c) { return c.hparams().n_quantizers; })
        .def_property_readonly("codebook_size", [](const ov::Codec & c) { return c.hparams().codebook_size; })
        .def_property_readonly("has_encoder", [](const ov::Codec & c) { return c.hparams().has_encoder; })
        .def_property("fused_snake", &ov::Codec::fused_snake, &ov::Codec::set_fused_snake,
                      "Use the fused Snake op (default), or the composed form of stock ggml ops.")
        .def(
            "decode",
            [](ov::Codec & c, const py::array & codes) {
                std::vector<int32_t> ids = codes_from_python(c, codes);
                const int64_t n_frames = codes.shape(1);
                ov::DecodeResult r;
                {
                    py::gil_scoped_release release;
                    r = c.decode(ids.data(), codes.shape(0), n_frames);
                }
                const int64_t n = (int64_t) r.audio.size();
                return to_numpy(std::move(r.audio), {n});
            },
            "codes"_a, "codes: int array [n_codebooks, T] -> float32 audio [T * hop_length].")
        .def(
            "decode_capture",
            [](ov::Codec & c, const py::array & codes, const std::vector<std::string> & names) {
                std::vector<int32_t> ids = codes_from_python(c, codes);
                ov::DecodeResult r;
                {
                    py::gil_scoped_release release;
                    r = c.decode(ids.data(), codes.shape(0), codes.shape(1), names);
                }
                py::dict out;
                const int64_t n = (int64_t) r.audio.size();
                out["audio"] = to_numpy(std::move(r.audio), {n});
                for (auto & [name, data] : r.captured) {
                    out[py::str(name)] = to_numpy(std::move(data), r.captured_shape.at(name));
                }
                return out;
            },
            "codes"_a, "names"_a,
            "Debug decode: {'audio': ..., name: intermediate} with each named graph intermediate in "
            "PyTorch order (ggml's shape reversed), e.g. 'rvq.sum', 'fc2.out', 'dec.blk2.res1.out'.")
        .def(
            "encode",
            [](ov::Codec & c, const py::array & wave, const py::array & wave16) {
                auto w = wave_from_python(wave, "wave");
                auto w16 = wave_from_python(wave16, "wave16");
                ov::EncodeResult r;
                {
                    py::gil_scoped_release release;
                    r = c.encode(w.data(), w.size(), w16.data(), w16.size());
                }
                py::array_t<int32_t> codes({(py::ssize_t) (r.codes.size() / r.n_frames), (py::ssize_t) r.n_frames});
                std::copy(r.codes.begin(), r.codes.end(), codes.mutable_data());
                return codes;
            },
            "wave"_a, "wave16"_a,
            "HiggsAudioV2TokenizerModel.encode of one mono signal given at both rates: wave float32 [N] at "
            "sample_rate (24 kHz), wave16 float32 [M] at 16 kHz -> int32 codes [n_codebooks, T].")
        .def(
            "encode_capture",
            [](ov::Codec & c, const py::array & wave, const py::array & wave16,
               const std::vector<std::string> & names) {
                auto w = wave_from_python(wave, "wave");
                auto w16 = wave_from_python(wave16, "wave16");
                ov::EncodeResult r;
                {
                    py::gil_scoped_release release;
                    r = c.encode(w.data(), w.size(), w16.data(), w16.size(), names);
                }
                py::dict out;
                py::array_t<int32_t> codes({(py::ssize_t) (r.codes.size() / r.n_frames), (py::ssize_t) r.n_frames});
                std::copy(r.codes.begin(), r.codes.end(), codes.mutable_data());
                out["codes"] = codes;
                for (auto & [name, data] : r.captured) {
                    out[py::str(name)] = to_numpy(std::move(data), r.captured_shape.at(name));
                }
                return out;
            },
            "wave"_a, "wave16"_a, "names"_a,
            "Debug encode: {'codes': ..., name: intermediate} in PyTorch order, e.g. 'hubert.out' "
            "[T_hubert, C], 'e_semantic', 'e_acoustic', 'fc.out' (the pre-quantisation latent [T, C]).");
}

const ov::Binding reg(&bind_codec);

}  // namespace
