#include "runtime/backend.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "ggml-cpu.h"
#include "ggml-rpc.h"  // installed by every libggml build; the functions are looked up at run time

namespace ov {

static const char kRpcScheme[] = "rpc://";
static const char kNoRpc[] = "this libggml has no RPC backend (scripts/install.sh builds it with GGML_RPC=ON)";

// OMNIVOICE_STOCK_OPS set to anything but "" or "0".
static bool stock_ops_from_env() {
    const char * v = std::getenv("OMNIVOICE_STOCK_OPS");
    return v && *v && std::strcmp(v, "0") != 0;
}

static std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return (char) std::tolower(c); });
    return s;
}

// The ggml devices a model can run on: the CPU and GPUs (accelerators such as BLAS only help the CPU).
static std::vector<ggml_backend_dev_t> local_devices() {
    std::vector<ggml_backend_dev_t> out;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        if (ggml_backend_dev_type(dev) != GGML_BACKEND_DEVICE_TYPE_ACCEL) out.push_back(dev);
    }
    return out;
}

// RPC endpoints ("HOST:PORT") this process connected to, for devices() and error messages.
static std::mutex g_rpc_mutex;
static std::set<std::string> g_rpc_endpoints;
static std::map<std::string, int> g_rpc_live;  // endpoint -> live Backends on it

// The endpoints in use, as the device that failed: ggml's abort message does not say which.
static std::string rpc_endpoints_text() {
    std::lock_guard<std::mutex> lock(g_rpc_mutex);
    std::string out;
    for (const auto & [e, n] : g_rpc_live) {
        if (n > 0) out += (out.empty() ? "" : ", ") + (kRpcScheme + e);
    }
    return out.empty() ? std::string("rpc://?") : out;
}

static uint64_t elapsed_ns(std::chrono::steady_clock::time_point t0) {
    return (uint64_t) std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<std::string> Backend::devices() {
    std::vector<std::string> out;
    for (ggml_backend_dev_t dev : local_devices()) out.push_back(ggml_backend_dev_name(dev));
    std::lock_guard<std::mutex> lock(g_rpc_mutex);
    for (const std::string & e : g_rpc_endpoints) out.push_back(kRpcScheme + e);
    return out;
}

// ggml's RPC functions, from libggml's registry: present when libggml was built with GGML_RPC=ON
// (scripts/install.sh), whatever libggml this module was compiled against (pip's isolated build
// environment holds the prebuilt wheel, which has no RPC).
using RpcAddServer = ggml_backend_reg_t (*)(const char * endpoint);
using RpcStartServer = void (*)(const char * endpoint, const char * cache_dir, size_t n_threads, size_t n_devices,
                                ggml_backend_dev_t * devices);

static void * rpc_proc(const char * name) {
    ggml_backend_reg_t reg = ggml_backend_reg_by_name("RPC");
    return reg ? ggml_backend_reg_get_proc_address(reg, name) : nullptr;
}

bool Backend::has_rpc() { return rpc_proc("ggml_backend_rpc_add_server") && rpc_proc("ggml_backend_rpc_start_server"); }

static std::string available_text() {
    std::string out;
    for (const std::string & d : Backend::devices()) out += (out.empty() ? "" : ", ") + d;
    if (Backend::has_rpc()) out += ", rpc://HOST:PORT (an omnivoice-rpc-server)";
    return out;
}

static void rpc_abort_to_exception(const char * message) {
    // ggml-rpc's RPC_STATUS_ASSERT text; the callback replaces ggml's own printing of every abort.
    if (std::strstr(message, "Remote RPC server crashed")) {
        throw DeviceError("RPC device " + rpc_endpoints_text() +
                          " stopped answering (the server died, closed the connection or sent a malformed reply)");
    }
    std::fprintf(stderr, "%s\n", message);
}

void install_rpc_abort_guard() { ggml_set_abort_callback(rpc_abort_to_exception); }

// A POSIX socket closed on scope exit.
struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) close(fd);
    }
};

// Waits for `events` on fd until the deadline; false on timeout.
static bool wait_fd(int fd, short events, std::chrono::steady_clock::time_point deadline) {
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return false;
        pollfd p{fd, events, 0};
        const int r = poll(&p, 1, (int) left.count());
        if (r > 0) return true;
        if (r == 0) return false;
        if (errno != EINTR) return false;
    }
}

// Connects to HOST:PORT and runs the RPC hello handshake with a deadline, so that a server that is
// down, busy with another client (ggml's server takes one at a time), not an RPC server, or of
// another protocol version is an error within seconds; ggml's own client would block in connect
// or recv, or abort. Throws DeviceError naming `device`.
static void probe_rpc(const std::string & device, const std::string & host, const std::string & port) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(Backend::kRpcProbeSeconds);
    const std::string secs = std::to_string(Backend::kRpcProbeSeconds) + " s";
    auto fail = [&](const std::string & why) { throw DeviceError("RPC device " + device + ": " + why); };

    addrinfo hints{};
    hints.ai_family = AF_INET;  // ggml-rpc's client connects over IPv4 only
    hints.ai_socktype = SOCK_STREAM;
    addrinfo * ai = nullptr;
    if (getaddrinfo(host.c_str(), port.c_str(), &hints, &ai) != 0 || !ai) fail("cannot resolve host '" + host + "'");
    Fd s;
    s.fd = socket(AF_INET, SOCK_STREAM, 0);
    if (s.fd < 0) {
        freeaddrinfo(ai);
        fail("cannot create a socket");
    }
    fcntl(s.fd, F_SETFL, fcntl(s.fd, F_GETFL) | O_NONBLOCK);
    int rc = connect(s.fd, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    if (rc != 0 && errno != EINPROGRESS) fail(std::string("cannot connect: ") + std::strerror(errno));
    if (rc != 0) {
        if (!wait_fd(s.fd, POLLOUT, deadline)) fail("no connection within " + secs);
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err == ECONNREFUSED) fail("connection refused (no RPC server listening there)");
        if (err != 0) fail(std::string("cannot connect: ") + std::strerror(err));
    }

    // ggml-rpc 5.x hello: | cmd 14 (1 byte) | size 24 (8 bytes) | connection caps (24 bytes) |, answered by
    // | size 28 (8 bytes) | major, minor, patch, pad (4 bytes) | caps (24 bytes) |. Zero caps: plain TCP.
    constexpr uint8_t kHello = 14;
    constexpr uint64_t kCaps = 24;
    uint8_t req[1 + 8 + kCaps] = {kHello};
    std::memcpy(req + 1, &kCaps, 8);
    size_t sent = 0;
    while (sent < sizeof(req)) {
        if (!wait_fd(s.fd, POLLOUT, deadline)) fail("no answer within " + secs);
        const ssize_t n = send(s.fd, req + sent, sizeof(req) - sent, MSG_NOSIGNAL);
        if (n <= 0 && errno != EAGAIN) fail("the connection closed during the handshake");
        if (n > 0) sent += (size_t) n;
    }
    uint8_t rsp[8 + 4 + kCaps];
    size_t got = 0;
    while (got < sizeof(rsp)) {
        if (!wait_fd(s.fd, POLLIN, deadline)) {
            fail("no answer to the RPC handshake within " + secs +
                 " (the server is busy with another client: it serves one at a time; or it is no RPC server)");
        }
        const ssize_t n = recv(s.fd, rsp + got, sizeof(rsp) - got, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN)) {
            fail("the server closed the connection during the handshake (not a ggml RPC server of protocol " +
                 std::to_string(RPC_PROTO_MAJOR_VERSION) + ".x: another ggml version?)");
        }
        if (n > 0) got += (size_t) n;
    }
    uint64_t size = 0;
    std::memcpy(&size, rsp, 8);
    const int major = rsp[8], minor = rsp[9], patch = rsp[10];
    const std::string ours = std::to_string(RPC_PROTO_MAJOR_VERSION) + "." + std::to_string(RPC_PROTO_MINOR_VERSION) +
                             "." + std::to_string(RPC_PROTO_PATCH_VERSION);
    if (size != 4 + kCaps || major != RPC_PROTO_MAJOR_VERSION || minor > RPC_PROTO_MINOR_VERSION) {
        fail("the server speaks RPC protocol " + std::to_string(major) + "." + std::to_string(minor) + "." +
             std::to_string(patch) + ", this build speaks " + ours + " (run the same ggml version on both sides)");
    }
}

// "rpc://HOST:PORT" -> a backend on device 0 of that server, and a small buffer on it that holds
// ggml's connection open for the backend's life. ggml keeps one connection per endpoint while any
// buffer on it lives and reconnects otherwise, without the probe's deadline, and dereferences a
// failed reconnection; it also serves one client at a time, so a second backend of this process
// on a live endpoint must not probe it (the server would not answer until we hang up).
static ggml_backend_t init_rpc(const std::string & device, ggml_backend_buffer_t & keepalive) {
    const std::string endpoint = device.substr(std::strlen(kRpcScheme));
    const size_t colon = endpoint.rfind(':');
    const std::string host = colon == std::string::npos ? "" : endpoint.substr(0, colon);
    const std::string port = colon == std::string::npos ? "" : endpoint.substr(colon + 1);
    const bool port_ok = !port.empty() && port.size() <= 5 &&
                         std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c); }) &&
                         std::stoi(port) >= 1 && std::stoi(port) <= 65535;
    if (host.empty() || !port_ok) {
        throw InvalidInput("device '" + device + "' must be rpc://HOST:PORT with a port in [1, 65535]");
    }
    bool live;
    {
        std::lock_guard<std::mutex> lock(g_rpc_mutex);
        live = g_rpc_live[endpoint] > 0;
        g_rpc_endpoints.insert(endpoint);
    }
    if (!live) probe_rpc(device, host, port);
    ggml_backend_reg_t reg = ((RpcAddServer) rpc_proc("ggml_backend_rpc_add_server"))(endpoint.c_str());
    if (!reg || ggml_backend_reg_dev_count(reg) == 0) {
        throw DeviceError("RPC device " + device + ": the server offers no device");
    }
    ggml_backend_t be = ggml_backend_dev_init(ggml_backend_reg_dev_get(reg, 0), nullptr);
    if (!be) throw DeviceError("RPC device " + device + ": ggml could not create its backend");
    keepalive = ggml_backend_alloc_buffer(be, ggml_backend_get_alignment(be));
    if (!keepalive) {
        ggml_backend_free(be);
        throw DeviceError("RPC device " + device + ": the server cannot allocate memory");
    }
    std::lock_guard<std::mutex> lock(g_rpc_mutex);
    ++g_rpc_live[endpoint];
    return be;
}

void serve_rpc(const std::string & host, int port, int n_threads, const std::string & cache_dir) {
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (!cpu) throw DeviceError("ggml has no CPU device to serve");
    const std::string endpoint = host + ":" + std::to_string(port);
    if (!Backend::has_rpc()) throw DeviceError(kNoRpc);
    ((RpcStartServer) rpc_proc("ggml_backend_rpc_start_server"))(
        endpoint.c_str(), cache_dir.empty() ? nullptr : cache_dir.c_str(), (size_t) std::max(n_threads, 1), 1, &cpu);
    throw DeviceError("RPC server on " + endpoint + " stopped: it could not listen there or accept a client");
}



static ggml_backend_t init_named(const std::string & device, ggml_backend_buffer_t & keepalive) {
    if (device.rfind(kRpcScheme, 0) == 0) {
        if (!Backend::has_rpc()) throw InvalidInput("device '" + device + "': " + kNoRpc + "; available: " + available_text());
        return init_rpc(device, keepalive);
    }
    const std::string want = lower(device);
    if (want == "cpu") return ggml_backend_cpu_init();
    for (ggml_backend_dev_t dev : local_devices()) {
        if (lower(ggml_backend_dev_name(dev)) == want) return ggml_backend_dev_init(dev, nullptr);
    }
    throw InvalidInput("device '" + device + "' is not available; available: " + available_text());
}

Backend::Backend(int n_threads, const std::string & device, bool force_stock_ops) {
    backend_ = device.empty() ? ggml_backend_init_best() : init_named(device, keepalive_);
    if (!backend_ && device.empty()) backend_ = ggml_backend_cpu_init();
    if (!backend_) {
        throw std::runtime_error("ggml: the compute backend " + (device.empty() ? std::string("(best)") : device) +
                                 " could not be initialised");
    }
    if (device.rfind(kRpcScheme, 0) == 0) {
        device_ = device;
    } else {
        ggml_backend_dev_t dev = ggml_backend_get_device(backend_);
        device_ = dev ? ggml_backend_dev_name(dev) : name();
    }
    stock_ops_ = !is_cpu() || force_stock_ops || stock_ops_from_env();
    set_n_threads(n_threads);
}

Backend::~Backend() {
    if (keepalive_) {
        release_device_memory(ggml_backend_buffer_free, keepalive_);
        std::lock_guard<std::mutex> lock(g_rpc_mutex);
        --g_rpc_live[device_.substr(std::strlen(kRpcScheme))];
    }
    if (backend_) {
        ggml_backend_free(backend_);
    }
}

bool Backend::is_cpu() const { return ggml_backend_is_cpu(backend_); }

const char * Backend::name() const { return ggml_backend_name(backend_); }

void Backend::set_n_threads(int n_threads) {
    if (n_threads <= 0) {
        n_threads = (int) std::thread::hardware_concurrency();
        if (n_threads <= 0) n_threads = 1;
    }
    n_threads_ = n_threads;
    if (ggml_backend_is_cpu(backend_)) {
        ggml_backend_cpu_set_n_threads(backend_, n_threads);
    }
}

void Backend::compute(ggml_cgraph * graph) {
    if (stock_ops_) {
        for (int i = 0; i < ggml_graph_n_nodes(graph); ++i) {
            const ggml_tensor * node = ggml_graph_node(graph, i);
            const ggml_op op = node->op;
            // A custom op is a CPU callback: on a device backend it cannot run, and on a forced CPU
            // one it would make the stock-op tests prove nothing.
            if (op == GGML_OP_CUSTOM || op == GGML_OP_MAP_CUSTOM1 || op == GGML_OP_MAP_CUSTOM2 ||
                op == GGML_OP_MAP_CUSTOM3) {
                throw std::logic_error(std::string("stock-op graph holds the custom op ") + ggml_get_name(node));
            }
            // Graphs run on one backend, without ggml's scheduler: an op the device refuses is an
            // error naming it rather than a crash inside the backend. (ggml-rpc 0.20.2 accepts
            // every op; its server's backend decides.)
            if (!is_cpu() && !ggml_backend_supports_op(backend_, node)) {
                throw std::runtime_error("ggml device " + device_ + " cannot run " + ggml_op_desc(node) + " (" +
                                         ggml_get_name(node) + ") with these types");
            }
        }
    }
    std::lock_guard<std::mutex> lock(compute_mutex_);
    const auto t0 = std::chrono::steady_clock::now();
    const ggml_status st = ggml_backend_graph_compute(backend_, graph);
    if (st != GGML_STATUS_SUCCESS) {
        throw std::runtime_error("ggml: graph compute on " + device_ + " failed with status " + std::to_string((int) st));
    }
    if (keepalive_) {
        // ggml-rpc only sends the graph; the server answers a memory query once it has run it.
        size_t free_mem = 0, total_mem = 0;
        ggml_backend_dev_memory(ggml_backend_get_device(backend_), &free_mem, &total_mem);
    }
    compute_ns_ += elapsed_ns(t0);
    ++computes_;
}

void Backend::upload(ggml_tensor * t, const void * data, size_t size) const {
    const auto t0 = std::chrono::steady_clock::now();
    ggml_backend_tensor_set(t, data, 0, size);
    up_ns_ += elapsed_ns(t0);
    up_bytes_ += size;
}

void Backend::download(const ggml_tensor * t, void * data, size_t size) const {
    const auto t0 = std::chrono::steady_clock::now();
    ggml_backend_tensor_get(t, data, 0, size);
    down_ns_ += elapsed_ns(t0);
    down_bytes_ += size;
}

Backend::Stats Backend::stats() const {
    return {up_bytes_, down_bytes_, computes_, up_ns_ * 1e-9, down_ns_ * 1e-9, compute_ns_ * 1e-9};
}

void Backend::reset_stats() {
    for (std::atomic<uint64_t> * c : {&up_bytes_, &down_bytes_, &up_ns_, &down_ns_, &compute_ns_, &computes_}) *c = 0;
}

}  // namespace ov
