// _core.testing capture hooks: run the codec with named graph intermediates copied out, for the
// stage-by-stage parity tests against the reference.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <string>
#include <vector>

#include "bindings/arrays.h"
#include "bindings/registry.h"
#include "models/omnivoice/codec/codec.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace ov {
namespace {

// Adds every captured intermediate to `out` under its name, in PyTorch order.
void add_captured(py::dict & out, std::map<std::string, std::vector<float>> & captured,
                  const std::map<std::string, std::vector<int64_t>> & shapes) {
    for (auto & [name, data] : captured) out[py::str(name)] = to_numpy(std::move(data), shapes.at(name));
}

py::dict decode_capture(Codec & c, const py::array & codes, const std::vector<std::string> & names) {
    auto ids = codes_from_python(codes);
    DecodeResult r;
    {
        py::gil_scoped_release release;
        r = c.decode(ids.data(), ids.shape(0), ids.shape(1), names);
    }
    py::dict out;
    const int64_t n = (int64_t) r.audio.size();
    out["audio"] = to_numpy(std::move(r.audio), {n});
    add_captured(out, r.captured, r.captured_shape);
    return out;
}

py::dict encode_capture(Codec & c, const py::array & wave, const py::array & wave16,
                        const std::vector<std::string> & names) {
    auto w = wave_from_python(wave, "wave");
    auto w16 = wave_from_python(wave16, "wave16");
    EncodeResult r;
    {
        py::gil_scoped_release release;
        r = c.encode(w.data(), w.size(), w16.data(), w16.size(), names);
    }
    py::dict out;
    out["codes"] = codes_to_numpy(r.codes, r.n_frames);
    add_captured(out, r.captured, r.captured_shape);
    return out;
}

void bind_capture(py::module_ & m) {
    m.def("decode_capture", &decode_capture, "codec"_a, "codes"_a, "names"_a,
          "Codec.decode with intermediates: {'audio': ..., name: intermediate} with each named graph\n"
          "intermediate in PyTorch order (ggml's shape reversed), e.g. 'rvq.sum', 'fc2.out',\n"
          "'dec.blk2.res1.out'.");
    m.def("encode_capture", &encode_capture, "codec"_a, "wave"_a, "wave16"_a, "names"_a,
          "Codec.encode with intermediates: {'codes': ..., name: intermediate} in PyTorch order, e.g.\n"
          "'hubert.out' [T_hubert, C], 'e_semantic', 'e_acoustic', 'fc.out' (the pre-quantisation\n"
          "latent [T, C]).");
}

const Binding reg(&bind_capture, Binding::testing);

}  // namespace
}  // namespace ov
