// libFuzzer target: the report reader and merger of mac-verify --merge
// (verification/src/report.cpp) on files built from the fuzzer's input (h5_builder.hpp).
// A report read is merged (alone, and with itself, which must be refused as a duplicate)
// and summarised as --merge does. A bad file must be refused with mac::InputError; any
// other exception, a crash or a sanitizer report is a finding. docs/fuzzing.md.
#include "h5_builder.hpp"
#include "mac/verify/report.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mac::fuzz::run_readers("report", data, size, {[](const std::string& p) {
                           const mac::verify::Report r = mac::verify::read_report(p);
                           const mac::verify::Report m = mac::verify::merge_reports({r});
                           (void)mac::verify::summary_table(m);
                           (void)mac::verify::certificate_markdown(m, {}, "");
                           (void)m.exit_code();
                           if (r.cases.empty()) return;
                           try {
                             mac::verify::merge_reports({r, r});
                           } catch (const mac::InputError&) {
                             return;
                           }
                           __builtin_trap();  // a case twice must never merge
                         }});
  return 0;
}
