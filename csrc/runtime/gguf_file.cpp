#include "runtime/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
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

// ggml says why it rejects a GGUF header only through its log callback. While this thread parses
// one, note_ggml_log (called by the module's callback) collects the error lines here.
static thread_local std::string * g_header_log = nullptr;

void note_ggml_log(ggml_log_level level, const char * text) {
    if (g_header_log && text && (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_CONT)) {
        *g_header_log += text;
    }
}

// ggml's lines joined into one phrase, e.g. "gguf_init_from_file_impl: tensor 'x...' name is too
// long" -> "tensor 'x...' name is too long" (function prefixes dropped, lines joined by "; ").
static std::string ggml_reason(const std::string & log) {
    std::string out;
    size_t start = 0;
    while (start < log.size()) {
        size_t end = log.find('\n', start);
        if (end == std::string::npos) end = log.size();
        std::string line = log.substr(start, end - start);
        start = end + 1;
        const size_t colon = line.find(": ");
        if (colon != std::string::npos && line.find(' ') > colon) line = line.substr(colon + 2);
        if (line.empty()) continue;
        out += (out.empty() ? "" : "; ") + line;
    }
    return out;
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

// ggml's GGUF parser sizes its vectors from the header's counts and lengths before reading them:
// an array count of 2^31 in a 1 MB file zero-fills 8 GB first. This walk of the header (layout:
// ggml's docs/gguf.md) checks every count and length against the bytes left in the file, so such
// a file is refused before ggml allocates anything. Returns what is wrong, or "" if nothing.
static std::string header_size_error(std::FILE * f, uint64_t file_size) {
    uint64_t pos = 0;
    const auto left = [&]() { return file_size - pos; };
    const auto read = [&](void * dst, uint64_t n) {
        if (n > left() || std::fread(dst, 1, n, f) != n) return false;
        pos += n;
        return true;
    };
    const auto skip = [&](uint64_t n) {
        if (n > left() || std::fseek(f, (long) n, SEEK_CUR) != 0) return false;
        pos += n;
        return true;
    };
    uint32_t magic_version[2];
    uint64_t counts[2];  // n_tensors, n_kv
    if (!read(magic_version, 8) || !read(counts, 16)) return "";  // ggml reports short headers itself
    // Smallest key-value entry: an empty key (8) and a type (4); smallest tensor info: 8+4+4+8.
    if (counts[1] > left() / 12) return "n_kv = " + std::to_string(counts[1]) + " exceeds the file";
    const auto string = [&](const std::string & what) -> std::string {
        uint64_t n = 0;
        if (!read(&n, 8) || !skip(n)) return what + ": a string length exceeds the file";
        return "";
    };
    for (uint64_t i = 0; i < counts[1]; ++i) {
        std::string err = string("metadata key #" + std::to_string(i));
        if (!err.empty()) return err;
        uint32_t type = 0;
        if (!read(&type, 4)) return "metadata #" + std::to_string(i) + " is truncated";
        uint64_t count = 1;
        if (type == GGUF_TYPE_ARRAY) {
            if (!read(&type, 4) || !read(&count, 8)) return "metadata #" + std::to_string(i) + " is truncated";
        }
        if (type == GGUF_TYPE_STRING) {
            if (count > left() / 8) return "metadata #" + std::to_string(i) + ": array count exceeds the file";
            for (uint64_t j = 0; j < count; ++j) {
                err = string("metadata #" + std::to_string(i));
                if (!err.empty()) return err;
            }
        } else if (type < GGUF_TYPE_COUNT && type != GGUF_TYPE_ARRAY) {
            // Bytes of UINT8 INT8 UINT16 INT16 UINT32 INT32 FLOAT32 BOOL, -, -, UINT64 INT64 FLOAT64.
            static const uint64_t kSize[GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
            const uint64_t size = kSize[type];
            if (size == 0 || count > left() / size || !skip(count * size)) {
                return "metadata #" + std::to_string(i) + ": array count exceeds the file";
            }
        } else {
            return "";  // an unknown type: ggml's parser names it
        }
    }
    if (counts[0] > left() / 24) return "n_tensors = " + std::to_string(counts[0]) + " exceeds the file";
    return "";
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
    std::string log;
    if (std::FILE * hf = std::fopen(path.c_str(), "rb")) {
        const std::string err = header_size_error(hf, (uint64_t) st.st_size);
        std::fclose(hf);
        if (!err.empty()) fail("not a readable GGUF file (" + err + ")");
    }
    g_header_log = &log;
    meta_ = gguf_init_from_file(path.c_str(), params);
    g_header_log = nullptr;
    if (!meta_) {
        std::string reason = ggml_reason(log);
        // It may quote the file's bytes: keep the message valid UTF-8 for Python.
        if (!valid_utf8(reason)) {
            for (char & ch : reason) ch = (unsigned char) ch < 0x80 ? ch : '?';
        }
        fail("not a readable GGUF file (" +
             (reason.empty() ? std::string("bad magic, unsupported version, or truncated header") : "ggml: " + reason) +
             ")");
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
            backend.upload(t, tmp.data(), tmp.size());
        }
        fclose(f);
    }
    if (buffer_) {
        ggml_backend_buffer_set_usage(buffer_, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    }
}

GGUFFile::~GGUFFile() {
    release_device_memory(ggml_backend_buffer_free, buffer_);
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

void GGUFFile::check_all_consumed(const std::vector<std::string> & prefixes) const {
    for (int64_t i = 0; i < gguf_get_n_tensors(meta_); ++i) {
        const std::string name = gguf_get_tensor_name(meta_, i);
        bool checked = prefixes.empty();
        for (const std::string & p : prefixes) checked = checked || name.compare(0, p.size(), p) == 0;
        if (checked && !consumed_.count(name)) fail("unexpected tensor " + name);
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

std::vector<float> GGUFFile::get_number_array(const std::string & key) const {
    const int64_t id = key_id(key, GGUF_TYPE_ARRAY);
    if (gguf_get_arr_type(meta_, id) == GGUF_TYPE_FLOAT32) {
        const float * data = (const float *) gguf_get_arr_data(meta_, id);
        return std::vector<float>(data, data + gguf_get_arr_n(meta_, id));
    }
    std::vector<float> out;
    try {
        for (int64_t v : get_int_array(key)) out.push_back((float) v);
    } catch (const ModelFormatError &) {
        fail("metadata key " + key + " is not a number array");
    }
    return out;
}

}  // namespace ov
