#pragma once
// Checked conversions between numpy arrays and the core's buffers, shared by the production
// bindings and the testing hooks. Bad input raises InvalidInput (ValueError) naming the argument.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

#include "models/omnivoice/codec/codec.h"

namespace ov {

// `codes`, a 2-D integer array, as contiguous int64 (row-major); the Codec checks its shape and ids.
pybind11::array_t<int64_t, pybind11::array::c_style> codes_from_python(const pybind11::array & codes);

// A 1-D real array of finite samples as contiguous float32; `what` names it in errors.
pybind11::array_t<float, pybind11::array::c_style> wave_from_python(const pybind11::array & wave, const char * what);

// Takes `data` of ggml shape `ne` (innermost first) as a numpy array of the reversed shape.
pybind11::array_t<float> to_numpy(std::vector<float> && data, const std::vector<int64_t> & ne);

// Codes row-major [n_codebooks, n_frames] as an int32 array of that shape.
pybind11::array_t<int32_t> codes_to_numpy(const std::vector<int32_t> & codes, int64_t n_frames);

}  // namespace ov
