#pragma once
// The few CUDA runtime calls the plugin worker makes for a CUDA plugin: the device mirror of
// a case arena, its stream, and the capture and replay of a step in a CUDA graph. Every
// function returns "" on success or the CUDA error's name and text; without the CUDA runtime
// (a CPU-only build) every function says so.
#include <cstddef>
#include <string>

namespace mac::verify::device {

bool built_with_cuda_runtime();
std::string set_device(int ordinal);
std::string alloc(void** ptr, size_t bytes);
void release(void* ptr);
std::string register_host(void* ptr, size_t bytes);  //!< pins a mapping for faster copies
void unregister_host(void* ptr);
std::string copy_to_device(void* dst, const void* src, size_t bytes, void* stream);
std::string copy_to_host(void* dst, const void* src, size_t bytes, void* stream);
std::string stream_create(void** stream);
void stream_destroy(void* stream);
/*! Waits for the stream; reports any asynchronous error of the work before it. */
std::string synchronize(void* stream);
std::string begin_capture(void* stream);
/*! Ends the capture and instantiates it into *exec. */
std::string end_capture(void* stream, void** exec);
std::string launch(void* exec, void* stream);
void destroy_exec(void* exec);
/*! "driver X.Y, runtime X.Y", or why none. */
std::string versions();

}  // namespace mac::verify::device
