#pragma once
// Exceptions thrown by the core. The bindings map them to Python exception types
// (ModelFormatError -> omnivoice.ModelFormatError, a ValueError; ModelFileNotFound ->
// ModelFileNotFoundError, both a FileNotFoundError and a ModelFormatError; InvalidInput -> ValueError;
// DeviceError -> omnivoice.DeviceError).
#include <stdexcept>
#include <string>

namespace ov {

// A GGUF file that cannot be used: truncated, wrong arch, missing or misshaped tensor.
struct ModelFormatError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// A model file that does not exist: in Python a FileNotFoundError, as a missing file is
// everywhere in the package.
struct ModelFileNotFound : ModelFormatError {
    using ModelFormatError::ModelFormatError;
};

// A compute device that cannot be reached or stopped answering (an RPC server down, silent, of
// another protocol version, or gone mid-call). In Python omnivoice.DeviceError, a RuntimeError.
struct DeviceError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Arguments from the caller that the model cannot run on (bad shapes, out-of-range ids).
struct InvalidInput : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

}  // namespace ov
