#include "bindings/arrays.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "runtime/errors.h"

namespace py = pybind11;

namespace ov {

py::array_t<int64_t, py::array::c_style> codes_from_python(const py::array & codes) {
    const char kind = codes.dtype().kind();
    if (kind != 'i' && kind != 'u') {
        throw InvalidInput("codes must be an integer array, got dtype " + std::string(py::str(codes.dtype())));
    }
    if (codes.ndim() != 2) {
        throw InvalidInput("codes must have shape [n_codebooks, T], got " + std::to_string(codes.ndim()) +
                           " dimensions");
    }
    // 64 bits, so that no id is wrapped into range before the codec checks it.
    return py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(codes);
}

py::array_t<float, py::array::c_style> wave_from_python(const py::array & wave, const char * what) {
    const char kind = wave.dtype().kind();
    if (kind != 'f' && kind != 'i' && kind != 'u') {
        throw InvalidInput(std::string(what) + " must be a real-valued array, got dtype " +
                           std::string(py::str(wave.dtype())));
    }
    if (wave.ndim() != 1) {
        throw InvalidInput(std::string(what) + " must be 1-D (mono samples), got " + std::to_string(wave.ndim()) +
                           " dimensions");
    }
    auto out = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(wave);
    const float * p = out.data();
    for (py::ssize_t i = 0; i < out.size(); ++i) {
        if (!std::isfinite(p[i])) {
            throw InvalidInput(std::string(what) + " has a non-finite sample (NaN or inf) at index " +
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

py::array_t<int32_t> codes_to_numpy(const std::vector<int32_t> & codes, int64_t n_frames) {
    py::array_t<int32_t> out({(py::ssize_t) (codes.size() / n_frames), (py::ssize_t) n_frames});
    std::copy(codes.begin(), codes.end(), out.mutable_data());
    return out;
}

}  // namespace ov
