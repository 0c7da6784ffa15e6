// Stub of the mac::cuda host API for builds without a CUDA compiler: every call that would
// touch a device returns StatusCode::kNoCuda, so tests and tools link and can skip visibly.
#include "mac/cuda/bench.hpp"
#include "mac/cuda/mac_cuda.hpp"

namespace mac::cuda {
namespace {
Status no_cuda() {
  return {StatusCode::kNoCuda,
          "mac_cuda was built without CUDA (no CUDA compiler at configure time)"};
}
}  // namespace

bool built_with_cuda() { return false; }
bool cuda_device_present() { return false; }
std::string device_description() { return "built without CUDA"; }
Status device_malloc(void** ptr, size_t) {
  if (ptr) *ptr = nullptr;
  return no_cuda();
}
Status device_free(void*) { return no_cuda(); }
Status device_memset(void*, int, size_t, void*) { return no_cuda(); }
Status copy_to_device(void*, const void*, size_t, void*) { return no_cuda(); }
Status copy_to_host(void*, const void*, size_t, void*) { return no_cuda(); }
Status copy_device_to_device(void*, const void*, size_t, void*) { return no_cuda(); }
Status stream_create(void** s) {
  if (s) *s = nullptr;
  return no_cuda();
}
Status stream_destroy(void*) { return no_cuda(); }
Status stream_synchronize(void*) { return no_cuda(); }
Status device_synchronize() { return no_cuda(); }

DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  ptr_ = o.ptr_;
  bytes_ = o.bytes_;
  o.ptr_ = nullptr;
  o.bytes_ = 0;
  return *this;
}
Status DeviceBuffer::allocate(size_t) { return no_cuda(); }

struct Engine::Impl {
  EngineConfig cfg;
};
Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;
Status Engine::create(const EngineConfig&, std::unique_ptr<Engine>* out) {
  if (out) out->reset();
  return no_cuda();
}
Status Engine::create(const EngineConfig&, void*, size_t, std::unique_ptr<Engine>* out) {
  if (out) out->reset();
  return no_cuda();
}
Status Engine::workspace_size(const EngineConfig&, size_t* bytes) {
  if (bytes) *bytes = 0;
  return no_cuda();
}
const EngineConfig& Engine::config() const { return impl_->cfg; }
size_t Engine::workspace_bytes() const { return 0; }
int Engine::chunk() const { return 0; }
Status Engine::last_chunk(int* chunk, void*) const {
  if (chunk) *chunk = 0;
  return no_cuda();
}
bool Engine::bulk_copies() const { return false; }
bool Engine::self_scheduled() const { return false; }
Status Engine::validate(const DecodeParams&, StepKind) const { return no_cuda(); }
Status Engine::full_attention(const DecodeParams&, void*) { return no_cuda(); }
Status Engine::mac_step(const DecodeParams&, void*) { return no_cuda(); }
Status Engine::prefill_entries(const PrefillParams&, void*) { return no_cuda(); }
Status Engine::capture(StepKind, const DecodeParams&, void*) { return no_cuda(); }
Status Engine::replay(void*) { return no_cuda(); }
Status Engine::read_error_flags(int* flags, bool, void*) {
  if (flags) *flags = 0;
  return no_cuda();
}

Status fill_random(void*, size_t, DType, uint64_t, float, float, void*) { return no_cuda(); }
Status capture_match_only(Engine&, const DecodeParams&, void*) { return no_cuda(); }
Status busy_wait(double, void*) { return no_cuda(); }
Status measure_read_bandwidth(size_t, int, double* gbps) {
  if (gbps) *gbps = 0;
  return no_cuda();
}

}  // namespace mac::cuda
