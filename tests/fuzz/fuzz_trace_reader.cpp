// libFuzzer target: the trace reader (reference/src/io/trace_io.cpp) on files built from the
// fuzzer's input (h5_builder.hpp). A bad file must be refused with mac::InputError; any other
// exception, a crash or a sanitizer report is a finding. docs/fuzzing.md.
#include "h5_builder.hpp"
#include "mac/io/trace_io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mac::fuzz::run_readers("trace", data, size,
                         {[](const std::string& p) { mac::io::read_trace_meta(p); },
                          // the first rows only, as mac-sim --max-tokens
                          [](const std::string& p) { mac::io::read_trace_layer(p, 0, 3); },
                          [](const std::string& p) { mac::io::read_trace(p, {}, 0); }});
  return 0;
}
