// Where a plugin runs: loading it, calling it on a case arena (through a CUDA device mirror
// for a CUDA plugin), the in-process channel, and the worker process's loop.
#include "plugin_device.hpp"
#include "plugin_protocol.hpp"

#include <dlfcn.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

namespace mac::verify {

// ---------------------------------------------------------------------------------------
// Protocol
// ---------------------------------------------------------------------------------------
namespace protocol {
namespace {
struct Frame {
  uint32_t type = 0;
  uint32_t has_fd = 0;
  uint64_t bytes = 0;
};

bool send_all(int sock, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t k = send(sock, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

/*! Waits until `sock` is readable or the deadline passes: 1 readable, -1 deadline, -2 error. */
int wait_readable(int sock, double deadline) {
  for (;;) {
    int ms = -1;
    if (deadline > 0) {
      const double left = deadline - now_s();
      if (left <= 0) return -1;
      ms = static_cast<int>(left * 1000) + 1;
    }
    pollfd p{sock, POLLIN, 0};
    const int r = poll(&p, 1, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -2;
    if (r > 0) return 1;
  }
}
}  // namespace

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool send_frame(int sock, uint32_t type, const std::string& payload, int fd) {
  Frame f{type, fd >= 0 ? 1u : 0u, payload.size()};
  iovec iov{&f, sizeof f};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))];
  if (fd >= 0) {
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof cbuf;
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  ssize_t k;
  do k = sendmsg(sock, &mh, MSG_NOSIGNAL);
  while (k < 0 && errno == EINTR);
  if (k <= 0) return false;
  if (static_cast<size_t>(k) < sizeof f &&
      !send_all(sock, reinterpret_cast<const char*>(&f) + k, sizeof f - static_cast<size_t>(k)))
    return false;
  return send_all(sock, payload.data(), payload.size());
}

int recv_frame(int sock, uint32_t* type, std::string* payload, int* fd, double deadline) {
  Frame f;
  size_t got = 0;
  *fd = -1;
  while (got < sizeof f) {
    const int w = wait_readable(sock, deadline);
    if (w < 0) return w;
    iovec iov{reinterpret_cast<char*>(&f) + got, sizeof f - got};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))];
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof cbuf;
    const ssize_t k = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return -2;
    if (k == 0) return 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
        std::memcpy(fd, CMSG_DATA(c), sizeof(int));
    got += static_cast<size_t>(k);
  }
  payload->assign(f.bytes, '\0');
  for (size_t n = 0; n < f.bytes;) {
    const int w = wait_readable(sock, deadline);
    if (w < 0) return w;
    const ssize_t k = recv(sock, payload->data() + n, f.bytes - n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return -2;
    if (k == 0) return 0;
    n += static_cast<size_t>(k);
  }
  *type = f.type;
  return 1;
}

std::string encode_ranges(const std::vector<abi::Range>& r) {
  return std::string(reinterpret_cast<const char*>(r.data()), r.size() * sizeof(abi::Range));
}

std::vector<abi::Range> decode_ranges(const std::string& s, size_t offset) {
  require(offset <= s.size(), "plugin protocol: ranges at ", offset, " past a message of ",
          s.size(), " bytes");
  std::vector<abi::Range> r((s.size() - offset) / sizeof(abi::Range));
  // memcpy with a null pointer is undefined even for 0 bytes (UBSan: no ranges, no data()).
  if (!r.empty()) std::memcpy(r.data(), s.data() + offset, r.size() * sizeof(abi::Range));
  return r;
}

std::string encode_reply(const Reply& r, const std::string& extra) {
  const int32_t kind = r.kind;
  const uint64_t n = extra.size();
  return std::string(reinterpret_cast<const char*>(&kind), 4) +
         std::string(reinterpret_cast<const char*>(&n), 8) + extra + r.text;
}

Reply decode_reply(const std::string& s, std::string* extra) {
  Reply r;
  if (s.size() < 12) return {Reply::kError, "malformed reply from the plugin worker"};
  int32_t kind;
  uint64_t n;
  std::memcpy(&kind, s.data(), 4);
  std::memcpy(&n, s.data() + 4, 8);
  if (s.size() < 12 + n) return {Reply::kError, "malformed reply from the plugin worker"};
  r.kind = kind;
  if (extra) *extra = s.substr(12, n);
  r.text = s.substr(12 + n);
  return r;
}

}  // namespace protocol

// ---------------------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------------------

PluginApi load_plugin(const std::string& path) {
  // RTLD_LOCAL: the plugin's own symbols (e.g. a statically linked copy of a library the
  // driver also has) stay its own.
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  require(h != nullptr, "plugin '", path, "' cannot be loaded: ", dlerror());
  PluginApi a;
  auto sym = [&](const char* name, bool required) {
    void* p = dlsym(h, name);
    require(p != nullptr || !required, "plugin '", path, "' does not export ", name,
            " (plugin_abi.h)");
    return p;
  };
  a.abi_version = reinterpret_cast<macv_abi_version_fn>(sym("macv_abi_version", true));
  a.query = reinterpret_cast<macv_query_fn>(sym("macv_query", true));
  a.create = reinterpret_cast<macv_create_fn>(sym("macv_create", true));
  a.step = reinterpret_cast<macv_step_fn>(sym("macv_step", true));
  a.destroy = reinterpret_cast<macv_destroy_fn>(sym("macv_destroy", true));
  a.prefill = reinterpret_cast<macv_prefill_fn>(sym("macv_prefill", false));
  a.full_attention = reinterpret_cast<macv_step_fn>(sym("macv_full_attention", false));
  a.check = reinterpret_cast<macv_check_fn>(sym("macv_check", false));
  return a;
}

bool can_run_cuda_plugins() { return device::built_with_cuda_runtime(); }
std::string cuda_versions() { return device::versions(); }

namespace {

// ---------------------------------------------------------------------------------------
// Calling a plugin on a case arena
// ---------------------------------------------------------------------------------------

class PluginRunner {
 public:
  explicit PluginRunner(const PluginApi& api) : api_(api) {}
  ~PluginRunner() { end_case(); }

  /*! Version, capabilities and their consistency with the exported symbols. */
  Reply query(macv_caps* caps) {
    const int32_t v = api_.abi_version();
    if (v != MACV_ABI_VERSION)
      return {Reply::kError, msg("the plugin was built against ABI version ", v,
                                 "; this driver speaks version ", MACV_ABI_VERSION)};
    std::memset(&caps_, 0, sizeof caps_);
    caps_.struct_size = sizeof caps_;
    err_[0] = 0;
    if (api_.query(&caps_, err_, sizeof err_) != 0)
      return {Reply::kError, std::string("macv_query: ") + err_};
    caps_.name[sizeof caps_.name - 1] = 0;
    caps_.version[sizeof caps_.version - 1] = 0;
    std::string bad = abi::validate_caps(caps_);
    if (bad.empty() && caps_.prefills && !api_.prefill)
      bad = "declares prefills but exports no macv_prefill";
    if (bad.empty() && caps_.full_attention && !api_.full_attention)
      bad = "declares full_attention but exports no macv_full_attention";
    if (bad.empty() && caps_.checks && !api_.check)
      bad = "declares checks but exports no macv_check";
    if (bad.empty() && caps_.device == MACV_DEVICE_CUDA && !device::built_with_cuda_runtime())
      bad = "is a CUDA plugin, and this mac-verify was built without the CUDA runtime";
    if (!bad.empty()) return {Reply::kError, "invalid capabilities: " + bad};
    *caps = caps_;
    return {};
  }

  Reply begin_case(const abi::CaseLayout& lay, uint8_t* host) {
    end_case();
    lay_ = lay;
    host_ = host;
    if (cuda()) {
      if (auto r = fail(device::set_device(lay.params.device_id), "device"); !r.ok()) return r;
      if (auto r = fail(device::stream_create(&stream_), "stream"); !r.ok()) return r;
      if (auto r = fail(device::alloc(reinterpret_cast<void**>(&dev_), lay.arena_bytes), "arena");
          !r.ok())
        return r;
      // Pinned host memory copies several times faster; pageable works too.
      registered_ = device::register_host(host_, lay.arena_bytes).empty();
      if (auto r = upload({{0, lay.arena_bytes}}); !r.ok()) return r;
      if (auto r = fail(device::synchronize(stream_), "upload"); !r.ok()) return r;
    }
    err_[0] = 0;
    if (api_.create(&lay_.params, stream_, &h_, err_, sizeof err_) != 0) {
      h_ = nullptr;
      return {Reply::kError, std::string("macv_create: ") + err_};
    }
    return {};
  }

  Reply prefill(const std::vector<abi::Range>& dirty) {
    if (auto r = upload(dirty); !r.ok()) return r;
    const macv_prefill_inputs in = abi::prefill_inputs(lay_, base(), caps_.device, 0);
    err_[0] = 0;
    if (api_.prefill(h_, &in, stream_, err_, sizeof err_) != 0)
      return {Reply::kError, std::string("macv_prefill: ") + err_};
    return finish("macv_prefill");
  }

  Reply step(bool graph, const std::vector<abi::Range>& dirty) {
    if (auto r = upload(dirty); !r.ok()) return r;
    const macv_step_inputs in = abi::step_inputs(lay_, base(), caps_.device, 0);
    macv_step_outputs out = abi::step_outputs(lay_, base(), caps_.device, 0);
    err_[0] = 0;
    if (graph && cuda() && caps_.graph_capturable) {
      // One step captured into a graph at the first graph step, replayed for every step: the
      // plugin must take everything that changes from device memory.
      if (!exec_) {
        if (auto r = fail(device::begin_capture(stream_), "capture"); !r.ok()) return r;
        const int32_t rc = api_.step(h_, &in, &out, stream_, err_, sizeof err_);
        const std::string e = device::end_capture(stream_, &exec_);
        if (rc != 0) return {Reply::kError, std::string("macv_step (graph capture): ") + err_};
        if (auto r = fail(e, "capture"); !r.ok()) return r;
      }
      if (auto r = fail(device::launch(exec_, stream_), "graph replay"); !r.ok()) return r;
    } else if (api_.step(h_, &in, &out, stream_, err_, sizeof err_) != 0) {
      return {Reply::kError, std::string("macv_step: ") + err_};
    }
    return finish("macv_step");
  }

  void end_case() {
    if (h_) api_.destroy(h_);
    h_ = nullptr;
    device::destroy_exec(exec_);
    exec_ = nullptr;
    if (dev_) device::release(dev_);
    dev_ = nullptr;
    if (registered_) device::unregister_host(host_);
    registered_ = false;
    device::stream_destroy(stream_);
    stream_ = nullptr;
  }

 private:
  bool cuda() const { return caps_.device == MACV_DEVICE_CUDA; }
  uint8_t* base() const { return cuda() ? dev_ : host_; }
  static Reply fail(const std::string& e, const char* what) {
    return e.empty() ? Reply{} : Reply{Reply::kError, std::string("CUDA (") + what + "): " + e};
  }
  Reply upload(const std::vector<abi::Range>& ranges) {
    if (!cuda()) return {};
    for (const auto& r : ranges)
      if (auto e = fail(device::copy_to_device(dev_ + r.offset, host_ + r.offset, r.bytes, stream_),
                        "upload");
          !e.ok())
        return e;
    return {};
  }
  /*! After a call: the stream's errors, macv_check, full attention, then the read-back. */
  Reply finish(const char* call) {
    Reply result;
    if (cuda())
      if (auto r = fail(device::synchronize(stream_), call); !r.ok()) return r;
    if (caps_.checks) {
      err_[0] = 0;
      if (api_.check(h_, stream_, err_, sizeof err_) != 0)
        result = {Reply::kProblem, std::string("macv_check after ") + call + ": " + err_};
    }
    if (caps_.full_attention && std::strcmp(call, "macv_step") == 0) {
      const macv_step_inputs in = abi::step_inputs(lay_, base(), caps_.device, 0);
      macv_step_outputs out = abi::step_outputs(lay_, base(), caps_.device, 0, true);
      err_[0] = 0;
      if (api_.full_attention(h_, &in, &out, stream_, err_, sizeof err_) != 0)
        return {Reply::kError, std::string("macv_full_attention: ") + err_};
    }
    if (cuda()) {
      for (const auto& r : abi::readback(lay_))
        if (auto e = fail(device::copy_to_host(host_ + r.offset, dev_ + r.offset, r.bytes, stream_),
                          "read-back");
            !e.ok())
          return e;
      if (auto r = fail(device::synchronize(stream_), "read-back"); !r.ok()) return r;
    }
    return result;
  }

  PluginApi api_;
  macv_caps caps_{};
  abi::CaseLayout lay_;
  uint8_t* host_ = nullptr;
  uint8_t* dev_ = nullptr;
  bool registered_ = false;
  void* stream_ = nullptr;
  void* exec_ = nullptr;
  macv_handle* h_ = nullptr;
  char err_[2048];
};

// ---------------------------------------------------------------------------------------
// In-process channel
// ---------------------------------------------------------------------------------------

class LocalChannel final : public Channel {
 public:
  explicit LocalChannel(const PluginApi& api) : runner_(api) {
    const Reply r = runner_.query(&caps_);
    require(r.ok(), "plugin: ", r.text);
  }
  const macv_caps& caps() const override { return caps_; }
  uint8_t* arena(size_t bytes) override {
    runner_.end_case();
    arena_.assign(bytes, 0);
    return arena_.data();
  }
  Reply begin_case(const abi::CaseLayout& layout) override {
    return runner_.begin_case(layout, arena_.data());
  }
  Reply prefill(const std::vector<abi::Range>& dirty) override { return runner_.prefill(dirty); }
  Reply step(int64_t, bool graph, const std::vector<abi::Range>& dirty) override {
    return runner_.step(graph, dirty);
  }
  void end_case() override { runner_.end_case(); }

 private:
  PluginRunner runner_;
  macv_caps caps_{};
  std::vector<uint8_t> arena_;
};

}  // namespace

std::unique_ptr<Channel> make_local_channel(const PluginApi& api) {
  return std::make_unique<LocalChannel>(api);
}

// ---------------------------------------------------------------------------------------
// Worker process
// ---------------------------------------------------------------------------------------

int plugin_worker_main(int sock) {
  using namespace protocol;
  std::unique_ptr<PluginRunner> runner;
  uint8_t* map = nullptr;
  size_t map_bytes = 0;
  auto unmap = [&] {
    if (map) munmap(map, map_bytes);
    map = nullptr;
  };
  for (;;) {
    uint32_t type = 0;
    std::string in;
    int fd = -1;
    const int got = recv_frame(sock, &type, &in, &fd, 0);
    if (got != 1) break;  // the driver closed the socket (or is gone): done
    Reply r;
    std::string extra;
    switch (type) {
      case kHello:
        try {
          runner = std::make_unique<PluginRunner>(load_plugin(in));
          macv_caps caps{};
          r = runner->query(&caps);
          extra.assign(reinterpret_cast<const char*>(&caps), sizeof caps);
        } catch (const std::exception& e) {
          r = {Reply::kError, e.what()};
        }
        break;
      case kBegin: {
        abi::CaseLayout lay;
        if (!runner || in.size() != sizeof lay || fd < 0) {
          r = {Reply::kError, "worker: malformed begin"};
          break;
        }
        std::memcpy(&lay, in.data(), sizeof lay);
        unmap();
        map_bytes = lay.arena_bytes;
        void* p = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        fd = -1;
        if (p == MAP_FAILED) {
          r = {Reply::kError, msg("worker: mmap of ", map_bytes, " bytes: ", std::strerror(errno))};
          break;
        }
        map = static_cast<uint8_t*>(p);
        r = runner->begin_case(lay, map);
        break;
      }
      case kPrefill:
        r = runner ? runner->prefill(decode_ranges(in, 0)) : Reply{Reply::kError, "no plugin"};
        break;
      case kStep: {
        // Payload: int64 step, int32 graph flag, then the dirty ranges.
        if (!runner || in.size() < 12) {
          r = {Reply::kError, msg("worker: malformed step (", in.size(), " bytes, at least 12)")};
          break;
        }
        int32_t graph = 0;
        std::memcpy(&graph, in.data() + 8, 4);
        r = runner->step(graph != 0, decode_ranges(in, 12));
        break;
      }
      case kEnd:
        if (runner) runner->end_case();
        unmap();
        break;
      default: r = {Reply::kError, msg("worker: unknown command ", type)};
    }
    if (fd >= 0) close(fd);
    std::fflush(stdout);
    if (!send_frame(sock, kReply, encode_reply(r, extra))) break;
  }
  runner.reset();
  unmap();
  return 0;
}

}  // namespace mac::verify
