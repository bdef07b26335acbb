#include "runtime/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "ggml-alloc.h"
#include "ggml-cpu.h"
#include "runtime/errors.h"

namespace ov {

std::string shape_str(const int64_t * ne, int n_dims) {
    std::string s = "[";
    for (int i = 0; i < n_dims; ++i) {
        if (i) s += ", ";
        s += std::to_string(ne[i]);
    }
    return s + "]";
}

// Whether `s` is well-formed UTF-8 as Python decodes it strictly: no overlong forms, no
// surrogates, nothing above U+10FFFF.
static bool valid_utf8(const std::string & s) {
    const auto * p = (const unsigned char *) s.data();
    const auto * end = p + s.size();
    while (p < end) {
        const unsigned c = *p;
        int n = 0;
        uint32_t cp = 0;
        if (c < 0x80) { ++p; continue; }
        if ((c & 0xE0) == 0xC0) { n = 1; cp = c & 0x1F; }
        else if ((c & 0xF0) == 0xE0) { n = 2; cp = c & 0x0F; }
        else if ((c & 0xF8) == 0xF0) { n = 3; cp = c & 0x07; }
        else return false;
        if (end - p <= n) return false;
        for (int i = 1; i <= n; ++i) {
            if ((p[i] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (p[i] & 0x3F);
        }
        static const uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
        if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        p += n + 1;
    }
    return true;
}

void GGUFFile::fail(const std::string & what) const {
    throw ModelFormatError(path_ + ": " + what);
}

GGUFFile::GGUFFile(const std::string & path, const std::string & expected_arch, const Backend & backend)
    : path_(path) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) {
        throw ModelFileNotFound(path + ": no such file");
    }
    if (!S_ISREG(st.st_mode)) {
        throw ModelFormatError(path + ": not a regular file");
    }

    gguf_init_params params = {/*no_alloc =*/true, /*ctx =*/&ctx_};
    meta_ = gguf_init_from_file(path.c_str(), params);
    if (!meta_) {
        fail("not a readable GGUF file (bad magic, unsupported version, or truncated header)");
    }

    // Every key, string value and tensor name reaches Python as str (and error messages quote
    // them): invalid UTF-8 is refused here, by key, rather than as a UnicodeDecodeError later.
    for (int64_t i = 0; i < gguf_get_n_kv(meta_); ++i) {
        const std::string key = gguf_get_key(meta_, i);
        if (!valid_utf8(key)) fail("metadata key #" + std::to_string(i) + " is not valid UTF-8");
        bool ok = true;
        if (gguf_get_kv_type(meta_, i) == GGUF_TYPE_STRING) {
            ok = valid_utf8(gguf_get_val_str(meta_, i));
        } else if (gguf_get_kv_type(meta_, i) == GGUF_TYPE_ARRAY && gguf_get_arr_type(meta_, i) == GGUF_TYPE_STRING) {
            for (size_t j = 0; ok && j < gguf_get_arr_n(meta_, i); ++j) ok = valid_utf8(gguf_get_arr_str(meta_, i, j));
        }
        if (!ok) fail("metadata key " + key + " holds a string that is not valid UTF-8");
    }
    for (int64_t i = 0; i < gguf_get_n_tensors(meta_); ++i) {
        if (!valid_utf8(gguf_get_tensor_name(meta_, i))) {
            fail("tensor #" + std::to_string(i) + " has a name that is not valid UTF-8");
        }
    }

    const int64_t arch_id = gguf_find_key(meta_, "general.architecture");
    if (arch_id < 0 || gguf_get_kv_type(meta_, arch_id) != GGUF_TYPE_STRING) {
        fail("missing metadata key general.architecture");
    }
    arch_ = gguf_get_val_str(meta_, arch_id);
    if (arch_ != expected_arch) {
        fail("architecture is '" + arch_ + "', expected '" + expected_arch + "'");
    }

    // The header is readable; make sure the tensor data it describes is really in the file.
    const size_t data_offset = gguf_get_data_offset(meta_);
    data_size_ = 0;
    for (int64_t i = 0; i < gguf_get_n_tensors(meta_); ++i) {
        const size_t end = gguf_get_tensor_offset(meta_, i) + gguf_get_tensor_size(meta_, i);
        data_size_ = std::max(data_size_, end);
    }
    if ((size_t) st.st_size < data_offset + data_size_) {
        fail("truncated: tensor data needs " + std::to_string(data_offset + data_size_) +
             " bytes, file has " + std::to_string((size_t) st.st_size));
    }

    ggml_backend_t be = backend.get();
    if (ggml_backend_is_cpu(be) && gguf_get_n_tensors(meta_) > 0) {
        // Map the file and point the tensors into the mapping: no copy, pages shared.
        const int fd = open(path.c_str(), O_RDONLY);
        if (fd < 0) fail("cannot open for reading");
        map_size_ = (size_t) st.st_size;
        map_ = mmap(nullptr, map_size_, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        if (map_ == MAP_FAILED) {
            map_ = nullptr;
            fail("mmap failed");
        }
        char * base = (char *) map_ + data_offset;
        buffer_ = ggml_backend_cpu_buffer_from_ptr(base, data_size_);
        for (int64_t i = 0; i < gguf_get_n_tensors(meta_); ++i) {
            ggml_tensor * t = ggml_get_tensor(ctx_, gguf_get_tensor_name(meta_, i));
            ggml_backend_tensor_alloc(buffer_, t, base + gguf_get_tensor_offset(meta_, i));
        }
    } else if (gguf_get_n_tensors(meta_) > 0) {
        buffer_ = ggml_backend_alloc_ctx_tensors(ctx_, be);
        if (!buffer_) fail("cannot allocate device memory for the weights");
        FILE * f = fopen(path.c_str(), "rb");
        if (!f) fail("cannot open for reading");
        std::vector<char> tmp;
        for (int64_t i = 0; i < gguf_get_n_tensors(meta_); ++i) {
            ggml_tensor * t = ggml_get_tensor(ctx_, gguf_get_tensor_name(meta_, i));
            tmp.resize(ggml_nbytes(t));
            if (fseek(f, (long) (data_offset + gguf_get_tensor_offset(meta_, i)), SEEK_SET) != 0 ||
                fread(tmp.data(), 1, tmp.size(), f) != tmp.size()) {
                fclose(f);
                fail(std::string("short read of tensor ") + ggml_get_name(t));
            }
            ggml_backend_tensor_set(t, tmp.data(), 0, tmp.size());
        }
        fclose(f);
    }
    if (buffer_) {
        ggml_backend_buffer_set_usage(buffer_, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    }
}

GGUFFile::~GGUFFile() {
    if (buffer_) ggml_backend_buffer_free(buffer_);
    if (ctx_) ggml_free(ctx_);
    if (meta_) gguf_free(meta_);
    if (map_) munmap(map_, map_size_);
}

size_t GGUFFile::n_tensors() const { return (size_t) gguf_get_n_tensors(meta_); }

ggml_tensor * GGUFFile::tensor(const std::string & name, const std::vector<int64_t> & ne,
                               const std::vector<ggml_type> & types) {
    ggml_tensor * t = ggml_get_tensor(ctx_, name.c_str());
    if (!t) fail("missing tensor " + name);
    const int n_dims = (int) ne.size();
    bool ok = n_dims <= GGML_MAX_DIMS;
    for (int i = 0; ok && i < GGML_MAX_DIMS; ++i) {
        ok = t->ne[i] == (i < n_dims ? ne[i] : 1);
    }
    if (!ok) {
        fail("tensor " + name + " has shape " + shape_str(t->ne, ggml_n_dims(t)) + ", expected " +
             shape_str(ne.data(), n_dims));
    }
    if (types.size() && std::find(types.begin(), types.end(), t->type) == types.end()) {
        std::string allowed;
        for (ggml_type ty : types) allowed += std::string(allowed.empty() ? "" : ", ") + ggml_type_name(ty);
        fail("tensor " + name + " has type " + ggml_type_name(t->type) + ", expected one of " + allowed);
    }
    consumed_.insert(name);
    return t;
}

void GGUFFile::check_all_consumed() const {
    for (int64_t i = 0; i < gguf_get_n_tensors(meta_); ++i) {
        const char * name = gguf_get_tensor_name(meta_, i);
        if (!consumed_.count(name)) fail(std::string("unexpected tensor ") + name);
    }
}

int64_t GGUFFile::key_id(const std::string & key, gguf_type type) const {
    const int64_t id = gguf_find_key(meta_, key.c_str());
    if (id < 0) fail("missing metadata key " + key);
    const gguf_type got = gguf_get_kv_type(meta_, id);
    if (got != type) {
        fail("metadata key " + key + " has type " + gguf_type_name(got) + ", expected " + gguf_type_name(type));
    }
    return id;
}

uint32_t GGUFFile::get_u32(const std::string & key) const {
    return gguf_get_val_u32(meta_, key_id(key, GGUF_TYPE_UINT32));
}

uint32_t GGUFFile::get_count(const std::string & key) const {
    const uint32_t n = get_u32(key);
    if (n > n_tensors()) {
        fail("metadata " + key + " = " + std::to_string(n) + " exceeds the " + std::to_string(n_tensors()) +
             " tensors of the file");
    }
    return n;
}

uint32_t GGUFFile::get_u32_in(const std::string & key, uint32_t lo, uint32_t hi) const {
    const uint32_t v = get_u32(key);
    if (v < lo || v > hi) {
        fail("metadata " + key + " = " + std::to_string(v) + " is outside [" + std::to_string(lo) + ", " +
             std::to_string(hi) + "]");
    }
    return v;
}

float GGUFFile::get_f32(const std::string & key) const {
    return gguf_get_val_f32(meta_, key_id(key, GGUF_TYPE_FLOAT32));
}

bool GGUFFile::get_bool(const std::string & key) const {
    return gguf_get_val_bool(meta_, key_id(key, GGUF_TYPE_BOOL));
}

std::string GGUFFile::get_str(const std::string & key) const {
    return gguf_get_val_str(meta_, key_id(key, GGUF_TYPE_STRING));
}

std::vector<int64_t> GGUFFile::get_int_array(const std::string & key) const {
    const int64_t id = key_id(key, GGUF_TYPE_ARRAY);
    const gguf_type et = gguf_get_arr_type(meta_, id);
    const size_t n = gguf_get_arr_n(meta_, id);
    const void * data = gguf_get_arr_data(meta_, id);
    std::vector<int64_t> out(n);
    for (size_t i = 0; i < n; ++i) {
        switch (et) {
            case GGUF_TYPE_INT32: out[i] = ((const int32_t *) data)[i]; break;
            case GGUF_TYPE_UINT32: out[i] = ((const uint32_t *) data)[i]; break;
            case GGUF_TYPE_INT64: out[i] = ((const int64_t *) data)[i]; break;
            case GGUF_TYPE_UINT64: out[i] = (int64_t) ((const uint64_t *) data)[i]; break;
            default: fail("metadata key " + key + " is not an integer array");
        }
    }
    return out;
}

std::vector<float> GGUFFile::get_f32_array(const std::string & key) const {
    const int64_t id = key_id(key, GGUF_TYPE_ARRAY);
    if (gguf_get_arr_type(meta_, id) != GGUF_TYPE_FLOAT32) fail("metadata key " + key + " is not a float32 array");
    const float * data = (const float *) gguf_get_arr_data(meta_, id);
    return std::vector<float>(data, data + gguf_get_arr_n(meta_, id));
}

}  // namespace ov
