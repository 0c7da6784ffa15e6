// The driver's side of the plugin loader: the worker process (spawn, commands, timeouts,
// crashes) and the implementation under test that drives a case through the ABI core.
#include "plugin_protocol.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <limits>

namespace mac::verify {
namespace {

using namespace protocol;

std::string signal_text(int sig) {
  const char* d = strsignal(sig);
  return msg("signal ", sig, " (", d ? d : "?", ")");
}

/*! A worker process running one plugin, and the shared memory of the current case. */
class WorkerChannel final : public Channel {
 public:
  WorkerChannel(std::string path, std::string exe, double load_timeout)
      : path_(std::move(path)), exe_(std::move(exe)), load_timeout_(load_timeout) {
    log_ = memfd_create("mac-verify-worker-log", MFD_CLOEXEC);
    require(log_ >= 0, "memfd_create failed: ", std::strerror(errno));
    // Appends from the worker's stdout and stderr; truncated at each case.
    fcntl(log_, F_SETFL, fcntl(log_, F_GETFL) | O_APPEND);
    const Reply r = start();
    require(r.ok(), r.text.find(path_) == std::string::npos ? "plugin '" + path_ + "': " : "",
            r.text);
  }
  ~WorkerChannel() override {
    stop();
    unmap();
    if (log_ >= 0) close(log_);
  }

  const macv_caps& caps() const override { return caps_; }

  uint8_t* arena(size_t bytes) override {
    unmap();
    mem_ = memfd_create("mac-verify-arena", MFD_CLOEXEC);
    require(mem_ >= 0, "memfd_create failed: ", std::strerror(errno));
    require(ftruncate(mem_, static_cast<off_t>(bytes)) == 0, "cannot size the case arena to ",
            bytes, " bytes: ", std::strerror(errno));
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, mem_, 0);
    require(p != MAP_FAILED, "cannot map the case arena of ", bytes,
            " bytes: ", std::strerror(errno));
    map_ = static_cast<uint8_t*>(p);
    map_bytes_ = bytes;
    return map_;
  }

  void set_case_timeout(double s) override { timeout_ = s; }

  Reply begin_case(const abi::CaseLayout& lay) override {
    // A worker killed by the last case (error, crash, timeout) is restarted first; its load
    // runs under the load timeout, and the case's own time starts after it.
    if (pid_ <= 0)
      if (Reply r = start(); !r.ok()) return r;
    if (ftruncate(log_, 0) != 0) {
      // Not fatal: the log then also holds earlier cases' output.
    }
    limit(timeout_, "--case-timeout");
    return request(kBegin, std::string(reinterpret_cast<const char*>(&lay), sizeof lay), mem_,
                   "macv_create");
  }
  Reply prefill(const std::vector<abi::Range>& dirty) override {
    return request(kPrefill, encode_ranges(dirty), -1, "macv_prefill");
  }
  Reply step(int64_t s, bool graph, const std::vector<abi::Range>& dirty) override {
    const int32_t g = graph ? 1 : 0;
    std::string p(reinterpret_cast<const char*>(&s), 8);
    p.append(reinterpret_cast<const char*>(&g), 4);
    return request(kStep, p + encode_ranges(dirty), -1, msg("step ", s));
  }
  void end_case() override {
    if (pid_ > 0) request(kEnd, {}, -1, "macv_destroy");
  }

 private:
  /*! Spawns the worker and loads the plugin in it. */
  Reply start() {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
      return {Reply::kError, msg("socketpair failed: ", std::strerror(errno))};
    const pid_t pid = fork();
    if (pid < 0) {
      close(sv[0]);
      close(sv[1]);
      return {Reply::kError, msg("fork failed: ", std::strerror(errno))};
    }
    if (pid == 0) {
      // Only async-signal-safe calls until exec (the driver may have threads).
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (sv[1] == 3)
        fcntl(3, F_SETFD, 0);
      else
        dup2(sv[1], 3);
      dup2(log_, 1);
      dup2(log_, 2);
      execl(exe_.c_str(), exe_.c_str(), "--plugin-worker", "3", static_cast<char*>(nullptr));
      _exit(127);
    }
    close(sv[1]);
    sock_ = sv[0];
    pid_ = pid;
    std::string caps;
    // dlopen, macv_abi_version and macv_query: a plugin that hangs in them (a static
    // initialiser waiting on a device, a query that never returns) is killed like a case.
    limit(load_timeout_, "--load-timeout");
    const Reply r = request(kHello, path_, -1, "loading the plugin (dlopen, macv_query)", &caps);
    if (r.ok()) {
      if (caps.size() != sizeof caps_) return {Reply::kError, "malformed capabilities"};
      std::memcpy(&caps_, caps.data(), sizeof caps_);
    }
    return r;
  }

  /*! Every request from now on must be answered within `seconds` (0: no limit) of now; the
   *  timeout message names `flag`. */
  void limit(double seconds, const char* flag) {
    limit_s_ = seconds;
    limit_flag_ = flag;
    deadline_ = seconds > 0 ? now_s() + seconds : 0;
  }

  /*! Kills the worker (if running) and reaps it; returns how it ended. */
  std::string stop(bool kill_it = true) {
    std::string how;
    if (pid_ > 0) {
      if (kill_it) kill(pid_, SIGKILL);
      int st = 0;
      if (waitpid(pid_, &st, 0) == pid_) {
        if (WIFSIGNALED(st))
          how = signal_text(WTERMSIG(st));
        else if (WIFEXITED(st))
          how = msg("exit status ", WEXITSTATUS(st));
      }
    }
    if (sock_ >= 0) close(sock_);
    sock_ = -1;
    pid_ = -1;
    return how;
  }

  /*! The last lines the worker printed (stdout and stderr), for a message. */
  std::string log_tail() const {
    struct stat st {};
    if (fstat(log_, &st) != 0 || st.st_size == 0) return {};
    const off_t n = std::min<off_t>(st.st_size, 800);
    std::string s(static_cast<size_t>(n), '\0');
    if (pread(log_, s.data(), s.size(), st.st_size - n) != n) return {};
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    for (auto& c : s)
      if (c == '\n') c = '|';
    return " [worker output: ..." + s + "]";
  }

  Reply request(uint32_t type, const std::string& payload, int fd, const std::string& what,
                std::string* extra = nullptr) {
    if (pid_ <= 0) return {Reply::kError, "the plugin's worker is not running"};
    uint32_t t = 0;
    std::string in;
    int rfd = -1;
    int got =
        send_frame(sock_, type, payload, fd) ? recv_frame(sock_, &t, &in, &rfd, deadline_) : 0;
    if (rfd >= 0) close(rfd);
    if (got == 1 && t == kReply) {
      Reply r = decode_reply(in, extra);
      if (r.kind == Reply::kError) {
        r.text += log_tail();
        stop();  // a fresh worker for the next case
      }
      return r;
    }
    if (got == -1) {
      const std::string tail = log_tail();
      stop();
      return {Reply::kError, msg("timed out after ", limit_s_, " s (", limit_flag_, ") during ",
                                 what, "; the worker was killed", tail)};
    }
    const std::string tail = log_tail();
    const std::string how = stop(false);
    return {Reply::kError,
            msg("the plugin's worker died during ", what, how.empty() ? "" : ": " + how, tail)};
  }

  void unmap() {
    if (map_) munmap(map_, map_bytes_);
    map_ = nullptr;
    if (mem_ >= 0) close(mem_);
    mem_ = -1;
  }

  std::string path_, exe_;
  macv_caps caps_{};
  pid_t pid_ = -1;
  int sock_ = -1, log_ = -1, mem_ = -1;
  uint8_t* map_ = nullptr;
  size_t map_bytes_ = 0;
  double load_timeout_ = 0;  //!< the hello exchange of every (re)start
  double timeout_ = 0;       //!< each case, from macv_create to macv_destroy
  double limit_s_ = 0, deadline_ = 0;
  const char* limit_flag_ = "";
};

/*! An implementation under test reached through a channel, one case at a time. */
class AbiImpl final : public Implementation {
 public:
  AbiImpl(std::unique_ptr<Channel> ch, std::string name, std::string device, double timeout)
      : ch_(std::move(ch)), name_(std::move(name)), device_(std::move(device)), timeout_(timeout) {}
  std::string name() const override { return name_; }
  std::string device() const override { return device_; }
  bool supports(const CaseSpec& c, std::string* why) const override {
    *why = abi::not_applicable(ch_->caps(), c);
    return why->empty();
  }

  void begin(const CaseInputs& in) override {
    problem_.clear();
    ab_ = std::make_unique<abi::AbiCase>(in, abi::choose(ch_->caps(), in.spec));
    ab_->attach(ch_->arena(ab_->layout().arena_bytes));
    ab_->begin();
    ch_->set_case_timeout(timeout_);
    take(ch_->begin_case(ab_->layout()));
    ab_->clear_dirty();
    if (ab_->choices().plugin_prefill) {
      take(ch_->prefill(ab_->dirty()));
      ab_->clear_dirty();
      note(ab_->check_prefill());
    }
    graph_ = in.spec.graph && ch_->caps().graph_capturable;
  }

  void step(int64_t s, StepOutput* out) override {
    ab_->before_step(s);
    take(ch_->step(s, graph_, ab_->dirty()));
    ab_->clear_dirty();
    note(ab_->after_step(s, out));
  }
  bool gate_state(int i, std::array<int64_t, 5>* out) const override {
    return ab_ && ab_->gate_state(i, out);
  }

  std::string end() override {
    ch_->end_case();
    ab_.reset();
    std::string p;
    p.swap(problem_);
    return p;
  }

 private:
  /*! An error ends the case (ERROR); a problem reported by macv_check fails it. */
  void take(const Reply& r) {
    if (r.kind == Reply::kError) throw std::runtime_error(r.text);
    if (r.kind == Reply::kProblem) note(r.text);
  }
  void note(const std::string& p) {
    if (problem_.empty()) problem_ = p;
  }

  std::unique_ptr<Channel> ch_;
  std::string name_, device_;
  double timeout_;
  std::unique_ptr<abi::AbiCase> ab_;
  std::string problem_;
  bool graph_ = false;
};

}  // namespace

std::unique_ptr<Channel> make_worker_channel(const std::string& path, double load_timeout_s,
                                             const std::string& worker_exe) {
  return std::make_unique<WorkerChannel>(path, worker_exe, load_timeout_s);
}

std::unique_ptr<Implementation> make_abi_impl(std::unique_ptr<Channel> channel,
                                              const std::string& name, const std::string& device,
                                              double case_timeout_s) {
  return std::make_unique<AbiImpl>(std::move(channel), name, device, case_timeout_s);
}

}  // namespace mac::verify
