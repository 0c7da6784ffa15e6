// libFuzzer target: the run-dump reader (reference/src/io/run_dump.cpp) on files built from
// the fuzzer's input (h5_builder.hpp). A bad file must be refused with mac::InputError; any
// other exception, a crash or a sanitizer report is a finding. docs/fuzzing.md.
#include "h5_builder.hpp"
#include "mac/io/run_dump.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mac::fuzz::run_readers("run_dump", data, size, {[](const std::string& p) {
                           const mac::io::RunDump d = mac::io::read_run_dump(p);
                           d.config.params.validate();
                         }});
  return 0;
}
