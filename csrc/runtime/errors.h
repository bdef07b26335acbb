#pragma once
// Exceptions thrown by the core. The bindings map them to Python exception types
// (ModelFormatError -> omnivoice.ModelFormatError, a ValueError; InvalidInput -> ValueError).
#include <stdexcept>
#include <string>

namespace ov {

// A GGUF file that cannot be used: truncated, wrong arch, missing or misshaped tensor.
struct ModelFormatError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Arguments from the caller that the model cannot run on (bad shapes, out-of-range ids).
struct InvalidInput : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

}  // namespace ov
