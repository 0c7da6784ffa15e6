#pragma once
/*! \file plugin.hpp
 *  \brief The plugin loader: an implementation under test built as a shared object exporting
 *         the C ABI of plugin_abi.h, run case by case through the ABI core (abi_case.hpp).
 *
 *  Process model (`mac-verify --impl plugin:PATH.so`): the driver starts a worker process
 *  (mac-verify itself, re-executed with --plugin-worker) that dlopens the plugin. Per case the
 *  driver lays the case out in a memfd arena shared with the worker and sends the commands
 *  (begin, prefill, step, end) over a socket; the worker calls the plugin on its mapping of the
 *  arena (for a CUDA plugin, on a device mirror it uploads before and reads back after every
 *  call). A signal, a hang past the case timeout, a CUDA error or an error string from the
 *  plugin makes that case ERROR with the message; the worker is then killed and a fresh one
 *  started for the next case. The worker's stdout and stderr go to a memory file whose tail is
 *  quoted in the message.
 */
#include "mac/verify/abi_case.hpp"
#include "mac/verify/impl.hpp"

#include <memory>
#include <string>
#include <vector>

namespace mac::verify {

/*! \brief The entry points of a plugin (the three optional ones may be null). */
struct PluginApi {
  macv_abi_version_fn abi_version = nullptr;
  macv_query_fn query = nullptr;
  macv_create_fn create = nullptr;
  macv_step_fn step = nullptr;
  macv_destroy_fn destroy = nullptr;
  macv_prefill_fn prefill = nullptr;
  macv_step_fn full_attention = nullptr;
  macv_check_fn check = nullptr;
};

/*! \brief Outcome of one command: ok, an error (the case ERRORs), or a problem the plugin
 *  reported through macv_check (the case FAILs). */
struct Reply {
  enum Kind : int { kOk = 0, kError = 1, kProblem = 2 };
  int kind = kOk;
  std::string text;
  bool ok() const { return kind == kOk; }
};

/*! \brief How the driver reaches an implementation: in the driver's process (tests,
 *  debugging) or in a worker process (the certification route). */
class Channel {
 public:
  virtual ~Channel() = default;
  /*! \brief Capabilities, validated (abi::validate_caps) when the channel was made. */
  virtual const macv_caps& caps() const = 0;
  /*! \brief Memory for a case arena of `bytes` bytes, valid until the next call. */
  virtual uint8_t* arena(size_t bytes) = 0;
  /*! \brief Limits each following case to `seconds` (0: none), from begin_case to end_case. */
  virtual void set_case_timeout(double seconds) { (void)seconds; }
  virtual Reply begin_case(const abi::CaseLayout& layout) = 0;
  virtual Reply prefill(const std::vector<abi::Range>& dirty) = 0;
  virtual Reply step(int64_t s, bool graph, const std::vector<abi::Range>& dirty) = 0;
  virtual void end_case() = 0;
};

/*! \brief Loads `path` with dlopen and resolves the entry points (InputError naming a
 *  missing symbol or the dlopen message). The library stays loaded. */
PluginApi load_plugin(const std::string& path);

/*! \brief A channel calling `api` in this process (no crash isolation, no timeout). */
std::unique_ptr<Channel> make_local_channel(const PluginApi& api);

/*! \brief A channel to a worker process running `worker_exe --plugin-worker FD` (normally
 *  /proc/self/exe, i.e. mac-verify) that loads `path`. Every load of the plugin in a (re)started
 *  worker (dlopen, macv_abi_version, macv_query) must finish within `load_timeout_s` (0: no
 *  limit); each case within the time given by set_case_timeout, counted from begin_case after
 *  any restart. InputError if the plugin cannot be loaded in time or declares invalid
 *  capabilities. */
std::unique_ptr<Channel> make_worker_channel(const std::string& path, double load_timeout_s,
                                             const std::string& worker_exe = "/proc/self/exe");

/*! \brief An implementation under test driven through a channel: the ABI core lays each case
 *  out, the channel runs it, the core checks and converts (abi_case.hpp). `name` and `device`
 *  are what the report records. */
std::unique_ptr<Implementation> make_abi_impl(std::unique_ptr<Channel> channel,
                                              const std::string& name, const std::string& device,
                                              double case_timeout_s);

/*! \brief The worker's loop on the socket `fd` (mac-verify --plugin-worker FD); returns the
 *  process's exit status. */
int plugin_worker_main(int fd);

/*! \brief True iff this build can run CUDA plugins (the driver was built with the CUDA
 *  runtime). */
bool can_run_cuda_plugins();
/*! \brief CUDA driver and runtime versions ("driver 12.8, runtime 13.0"), or why none. */
std::string cuda_versions();

}  // namespace mac::verify
