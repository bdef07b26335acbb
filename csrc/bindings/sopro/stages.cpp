// Python surface of Sopro's audio stages: _core.SoproStages.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings/arrays.h"
#include "bindings/registry.h"
#include "models/sopro/audio_stages.h"
#include "runtime/errors.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace {

using F32Array = py::array_t<float, py::array::c_style | py::array::forcecast>;

// A (C, T) float array as upstream shapes a feature map, laid out for the core as ggml [C, T]
// (T rows of C): the transpose, contiguous.
F32Array channels_by_time(const py::array & x, const char * what) {
    if (x.ndim() != 2 || !(py::isinstance<py::array_t<float>>(x) || py::isinstance<py::array_t<double>>(x))) {
        throw ov::InvalidInput(std::string(what) + " must be a 2-D float array (channels, frames)");
    }
    return F32Array::ensure(x.attr("T").attr("copy")(py::str("C")));
}

py::dict captures_to_python(ov::StageResult && r) {
    py::dict out;
    for (auto & [name, data] : r.captured) out[py::str(name)] = ov::to_numpy(std::move(data), r.captured_shape[name]);
    return out;
}

ov::StageResult vocode(ov::SoproAudioStages & s, const py::array & mel, const std::vector<std::string> & capture) {
    F32Array m = channels_by_time(mel, "mel");
    py::gil_scoped_release release;
    return s.vocode(m.data(), m.shape(1), m.shape(0), capture);
}

void bind_sopro_stages(py::module_ & m) {
    py::class_<ov::SoproAudioStages, std::shared_ptr<ov::SoproAudioStages>>(
        m, "SoproStages", "Sopro's audio stages (vocoder; the front ends' tables), loaded from a sopro-tts GGUF.")
        .def(py::init([](const std::string & path, const ov::BackendPtr & backend) {
                 return std::make_shared<ov::SoproAudioStages>(path, backend);
             }),
             "path"_a, "backend"_a)
        .def_property_readonly("metadata", [](const ov::SoproAudioStages & s) { return ov::metadata_dict(s.file()); })
        .def_property_readonly("stock_ops", &ov::SoproAudioStages::stock_ops,
                               "Whether the graphs use stock ggml ops only (the backend's stock_ops).")
        .def(
            "frontend",
            [](const ov::SoproAudioStages & s, const std::string & name) {
                const ov::FrontendTables & t = s.frontend(name);
                py::dict out;
                out["window"] = ov::to_numpy(std::vector<float>(t.window), {(int64_t) t.window.size()});
                out["fb"] = ov::to_numpy(std::vector<float>(t.fb), {t.n_mels, (int64_t) t.fb.size() / t.n_mels});
                return out;
            },
            "name"_a,
            "The F32 STFT window (win_length,) and mel filterbank (n_fft//2+1, n_mels) of front end 'vocoder' "
            "as the file stores them.")
        .def(
            "vocode",
            [](ov::SoproAudioStages & s, const py::array & mel) {
                ov::StageResult r = vocode(s, mel, {});
                return ov::to_numpy(std::move(r.data), r.ne);
            },
            "mel"_a, "Vocoder.decode: log-mel float (n_mels, T >= 2) -> float32 audio ((T-1) * hop_length,).")
        .def(
            "vocode_intermediates",
            [](ov::SoproAudioStages & s, const py::array & mel, const std::vector<std::string> & names) {
                return captures_to_python(vocode(s, mel, names));
            },
            "mel"_a, "names"_a,
            "The vocoder graph's intermediates by name ('voc.backbone' (T, dim), 'voc.spec' (T, n_fft+2), "
            "'voc.embed', 'voc.blk<i>') for one mel (n_mels, T), as float32 (frames, channels) arrays.");
}

const ov::Binding reg(&bind_sopro_stages);

}  // namespace
