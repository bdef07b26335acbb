// pybind11 entry point of omnivoice._core: the backend handle, the ModelFormatError translation,
// and the component bindings registered from bindings/*.cpp (bindings/testing/*.cpp fill the
// `_core.testing` submodule).
#include <cstdio>
#include <cstdlib>
#include <string>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings/registry.h"
#include "runtime/backend.h"
#include "runtime/errors.h"
#include "runtime/gguf_file.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace ov {

static std::vector<BindFn> & registry(Binding::Target target) {
    static std::vector<BindFn> fns[2];  // function-local: safe from static-init order across files
    return fns[target];
}

Binding::Binding(BindFn fn, Target target) { registry(target).push_back(fn); }

const std::vector<BindFn> & bindings(Binding::Target target) { return registry(target); }

static py::object gguf_value(gguf_context * meta, int64_t id, gguf_type type, size_t i) {
    // Element i of an array value, or the scalar when type is not an array.
    switch (type) {
        case GGUF_TYPE_UINT8: return py::int_(((const uint8_t *) gguf_get_arr_data(meta, id))[i]);
        case GGUF_TYPE_INT8: return py::int_(((const int8_t *) gguf_get_arr_data(meta, id))[i]);
        case GGUF_TYPE_UINT16: return py::int_(((const uint16_t *) gguf_get_arr_data(meta, id))[i]);
        case GGUF_TYPE_INT16: return py::int_(((const int16_t *) gguf_get_arr_data(meta, id))[i]);
        case GGUF_TYPE_UINT32: return py::int_(((const uint32_t *) gguf_get_arr_data(meta, id))[i]);
        case GGUF_TYPE_INT32: return py::int_(((const int32_t *) gguf_get_arr_data(meta, id))[i]);
        case GGUF_TYPE_UINT64: return py::int_(((const uint64_t *) gguf_get_arr_data(meta, id))[i]);
        case GGUF_TYPE_INT64: return py::int_(((const int64_t *) gguf_get_arr_data(meta, id))[i]);
        case GGUF_TYPE_FLOAT32: return py::float_(((const float *) gguf_get_arr_data(meta, id))[i]);
        case GGUF_TYPE_FLOAT64: return py::float_(((const double *) gguf_get_arr_data(meta, id))[i]);
        case GGUF_TYPE_BOOL: return py::bool_(((const int8_t *) gguf_get_arr_data(meta, id))[i] != 0);
        case GGUF_TYPE_STRING: return py::str(gguf_get_arr_str(meta, id, i));
        default: return py::none();
    }
}

py::dict metadata_dict(const GGUFFile & file) {
    gguf_context * meta = file.meta();
    py::dict out;
    for (int64_t id = 0; id < gguf_get_n_kv(meta); ++id) {
        const char * key = gguf_get_key(meta, id);
        const gguf_type type = gguf_get_kv_type(meta, id);
        py::object value;
        switch (type) {
            case GGUF_TYPE_UINT8: value = py::int_(gguf_get_val_u8(meta, id)); break;
            case GGUF_TYPE_INT8: value = py::int_(gguf_get_val_i8(meta, id)); break;
            case GGUF_TYPE_UINT16: value = py::int_(gguf_get_val_u16(meta, id)); break;
            case GGUF_TYPE_INT16: value = py::int_(gguf_get_val_i16(meta, id)); break;
            case GGUF_TYPE_UINT32: value = py::int_(gguf_get_val_u32(meta, id)); break;
            case GGUF_TYPE_INT32: value = py::int_(gguf_get_val_i32(meta, id)); break;
            case GGUF_TYPE_UINT64: value = py::int_(gguf_get_val_u64(meta, id)); break;
            case GGUF_TYPE_INT64: value = py::int_(gguf_get_val_i64(meta, id)); break;
            case GGUF_TYPE_FLOAT32: value = py::float_(gguf_get_val_f32(meta, id)); break;
            case GGUF_TYPE_FLOAT64: value = py::float_(gguf_get_val_f64(meta, id)); break;
            case GGUF_TYPE_BOOL: value = py::bool_(gguf_get_val_bool(meta, id)); break;
            case GGUF_TYPE_STRING: value = py::str(gguf_get_val_str(meta, id)); break;
            case GGUF_TYPE_ARRAY: {
                const gguf_type et = gguf_get_arr_type(meta, id);
                py::list items;
                for (size_t i = 0; i < gguf_get_arr_n(meta, id); ++i) items.append(gguf_value(meta, id, et, i));
                value = items;
                break;
            }
            default: value = py::none();
        }
        out[py::str(key)] = value;
    }
    return out;
}

}  // namespace ov

// ggml reports problems on stderr; ours reach Python as exceptions naming them (GGUF header errors
// carry ggml's own reason), so its lines would only repeat them. OMNIVOICE_GGML_LOG=1 shows them.
static void ggml_log_quiet(ggml_log_level level, const char * text, void *) {
    ov::note_ggml_log(level, text);
    static const bool verbose = [] {
        const char * env = std::getenv("OMNIVOICE_GGML_LOG");
        return env && *env && std::string(env) != "0";
    }();
    if (verbose) std::fputs(text, stderr);
}

PYBIND11_MODULE(_core, m) {
    m.doc() = "omnivoice C++ core on ggml";
    ggml_log_set(ggml_log_quiet, nullptr);

    static py::exception<ov::ModelFormatError> model_format_error(m, "ModelFormatError", PyExc_ValueError);
    // Held for the life of the process, as pybind11's own exception types are.
    const py::tuple bases = py::make_tuple(py::handle(PyExc_FileNotFoundError), model_format_error);
    static py::handle file_not_found =
        PyErr_NewException("omnivoice._core.ModelFileNotFoundError", bases.ptr(), nullptr);
    m.attr("ModelFileNotFoundError") = file_not_found;
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const ov::ModelFileNotFound & e) {
            py::set_error(file_not_found, e.what());
        } catch (const ov::ModelFormatError & e) {
            py::set_error(model_format_error, e.what());
        }
    });

    py::register_exception<ov::DeviceError>(m, "DeviceError", PyExc_RuntimeError);
    ov::install_rpc_abort_guard();

    py::class_<ov::Backend, ov::BackendPtr>(m, "Backend", "A ggml compute device: the CPU, a GPU or an RPC server.")
        .def(py::init([](int n_threads, const std::string & device, bool stock_ops) {
                 return std::make_shared<ov::Backend>(n_threads, device, stock_ops);
             }),
             "n_threads"_a = 0, "device"_a = "", "stock_ops"_a = false,
             py::call_guard<py::gil_scoped_release>(),
             "n_threads <= 0 uses every core. device: '' (the best ggml offers: a GPU when built with one, else the "
             "CPU), 'cpu', a name from Backend.devices() such as 'CUDA0', or 'rpc://HOST:PORT'. stock_ops: build "
             "graphs from stock ggml ops only, as on a GPU (also set by OMNIVOICE_STOCK_OPS=1).")
        .def_static("devices", &ov::Backend::devices,
                    "Device names ggml sees: CPU, GPUs, and rpc://HOST:PORT of the RPC servers this process uses.")
        .def_property_readonly_static("has_rpc", [](py::object) { return ov::Backend::has_rpc(); },
                                      "Whether this build links ggml's RPC backend (rpc:// devices).")
        .def_property("n_threads", &ov::Backend::n_threads, &ov::Backend::set_n_threads)
        .def_property_readonly("name", [](const ov::Backend & b) { return std::string(b.name()); })
        .def_property_readonly("device", &ov::Backend::device, "The device as Backend(device=...) names it.")
        .def_property_readonly("is_cpu", &ov::Backend::is_cpu)
        .def_property_readonly("stock_ops", &ov::Backend::stock_ops,
                               "Whether models loaded on it use stock ggml ops only (always off the CPU).")
        .def("stats", [](const ov::Backend & b) {
                 const ov::Backend::Stats s = b.stats();
                 return py::dict("upload_bytes"_a = s.upload_bytes, "upload_s"_a = s.upload_s,
                                 "download_bytes"_a = s.download_bytes, "download_s"_a = s.download_s,
                                 "computes"_a = s.computes, "compute_s"_a = s.compute_s);
             },
             "Bytes copied to and from the device and the seconds spent copying and computing, since the "
             "backend was made or reset_stats().")
        .def("reset_stats", &ov::Backend::reset_stats)
        .def("__repr__", [](const ov::Backend & b) { return "<omnivoice.Backend device='" + b.device() + "'>"; });
    m.def("serve_rpc", &ov::serve_rpc, "host"_a, "port"_a, "n_threads"_a, "cache_dir"_a = "",
          py::call_guard<py::gil_scoped_release>(),
          "Serves this process's CPU backend over ggml's RPC protocol on host:port, one client at a time; "
          "returns only when it cannot listen or accept (raising DeviceError).");

    for (ov::BindFn fn : ov::bindings(ov::Binding::core)) fn(m);
    py::module_ testing = m.def_submodule("testing", "Op, capture and GGUF hooks for the test suite.");
    for (ov::BindFn fn : ov::bindings(ov::Binding::testing)) fn(testing);
    // Importable by name too (`import omnivoice._core.testing`), as a package's submodule would be.
    py::module_::import("sys").attr("modules")["omnivoice._core.testing"] = testing;
}
