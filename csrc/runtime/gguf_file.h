#pragma once
// One GGUF file loaded for inference: metadata, and every tensor placed in a backend buffer
// (mmapped in place on the CPU backend, copied to the device otherwise). Lookups are strict:
// a tensor must exist with the exact shape and an allowed type, and after a model has taken
// what it needs, check_all_consumed() rejects files with tensors nobody asked for.
#include <cstdint>
#include <initializer_list>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "ggml.h"
#include "gguf.h"
#include "runtime/backend.h"

namespace ov {

class GGUFFile {
public:
    // Opens `path`, checks general.architecture == expected_arch and that the file holds all
    // the tensor data its header promises, then loads the tensors into `backend`'s memory.
    GGUFFile(const std::string & path, const std::string & expected_arch, const Backend & backend);
    ~GGUFFile();
    GGUFFile(const GGUFFile &) = delete;
    GGUFFile & operator=(const GGUFFile &) = delete;

    const std::string & path() const { return path_; }
    const std::string & arch() const { return arch_; }

    // Tensor `name` with ggml shape `ne` (innermost first, the reverse of PyTorch's order).
    // `types` lists the accepted storage types; empty accepts any.
    ggml_tensor * tensor(const std::string & name, std::initializer_list<int64_t> ne,
                         std::initializer_list<ggml_type> types = {}) {
        return tensor(name, std::vector<int64_t>(ne), std::vector<ggml_type>(types));
    }
    // The same with a shape known only at run time.
    ggml_tensor * tensor(const std::string & name, const std::vector<int64_t> & ne,
                         const std::vector<ggml_type> & types);
    // Throws if some tensor of the file was never requested through tensor(); with `prefixes`,
    // only among the tensors whose names start with one of them (the stages a model loads of a
    // file that holds more).
    void check_all_consumed(const std::vector<std::string> & prefixes = {}) const;

    uint32_t get_u32(const std::string & key) const;
    // A u32 that counts parts each with tensors of their own (layers, quantizers, blocks): at
    // most the file's tensor count, so a corrupt count fails here, before it sizes anything.
    uint32_t get_count(const std::string & key) const;
    // A u32 in [lo, hi] (rates and sizes that no tensor checks); throws naming key and range.
    uint32_t get_u32_in(const std::string & key, uint32_t lo, uint32_t hi) const;
    float get_f32(const std::string & key) const;
    bool get_bool(const std::string & key) const;
    std::string get_str(const std::string & key) const;
    std::vector<int64_t> get_int_array(const std::string & key) const;
    // A FLOAT32 array, or an integer array converted to float.
    std::vector<float> get_number_array(const std::string & key) const;

    gguf_context * meta() const { return meta_; }
    size_t n_tensors() const;

private:
    int64_t key_id(const std::string & key, gguf_type type) const;
    [[noreturn]] void fail(const std::string & what) const;

    std::string path_;
    std::string arch_;
    gguf_context * meta_ = nullptr;
    ggml_context * ctx_ = nullptr;
    ggml_backend_buffer_t buffer_ = nullptr;
    void * map_ = nullptr;
    size_t map_size_ = 0;
    size_t data_size_ = 0;
    std::set<std::string> consumed_;
};

// To be called from the process's ggml log callback: while GGUFFile parses a header on this
// thread, ggml's error lines are kept for the exception (they hold the reason, e.g. a tensor name
// of 64 bytes or more, or an alignment that is not a power of two).
void note_ggml_log(ggml_log_level level, const char * text);

// A tensor name or metadata key: `prefix` and `parts` joined by dots, numbers written out, an empty
// prefix adding nothing; e.g. join_name("acoustic_decoder", "block", 2) is
// "acoustic_decoder.block.2". Prefixes are passed without a trailing dot and every name is built
// here, so that no component joins them its own way.
template <typename... Parts>
std::string join_name(std::string prefix, const Parts &... parts) {
    const auto add = [&prefix](const auto & part) {
        if (!prefix.empty()) prefix += '.';
        if constexpr (std::is_arithmetic_v<std::decay_t<decltype(part)>>) {
            prefix += std::to_string(part);
        } else {
            prefix += part;
        }
    };
    (add(parts), ...);
    return prefix;
}

// Text of a ggml shape, e.g. "[64, 1024]".
std::string shape_str(const int64_t * ne, int n_dims);

}  // namespace ov
