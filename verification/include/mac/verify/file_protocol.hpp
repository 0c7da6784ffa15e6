#pragma once
/*! \file file_protocol.hpp
 *  \brief The file protocol, for kernels that live outside C (a torch op, Triton, JAX):
 *         `mac-verify --export DIR` writes every selected case's per-step inputs in the ABI's
 *         tensors and layouts (HDF5), the user's program runs its kernel over them and writes
 *         its outputs, `mac-verify --grade DIR` grades them through the same ABI core and
 *         checks as the plugin route. Schemas: docs/verification.md; Python helper:
 *         verification/python/macv_files.py.
 *
 *  DIR/export.h5      manifest: nonce, matrix hash, driver commit, declared capabilities, and
 *                     per case its line and whether it was exported (or why not applicable)
 *  DIR/inputs/case-NNNNN.h5   one case's inputs (schema mac-verify-inputs)
 *  DIR/outputs/case-NNNNN.h5  written by the user's program (schema mac-verify-outputs)
 */
#include "mac/verify/abi_case.hpp"
#include "mac/verify/impl.hpp"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mac::verify::files {

/*! \brief "case-00012.h5". */
std::string case_file(int id);

/*! \brief The layouts of an exported case: the first KV layout declared (NHD before HND), the
 *  ring head-major, packed q/q̃/o, the dtypes declared, the driver's prefill. */
abi::Choices export_choices(const macv_caps& caps);

/*! \brief Writes the inputs of `cases` (those applicable to `caps`) to `dir`, with `nonce`
 *  mixed into every seed; `driver` names the driver's commit and `command` the command line
 *  (recorded in the manifest). Returns the number exported. Files are written atomically;
 *  the manifest last. */
int export_cases(const std::string& dir, const std::vector<CaseSpec>& cases, const macv_caps& caps,
                 uint64_t nonce, const std::string& matrix_fnv1a, const std::string& driver,
                 const std::string& command);

/*! \brief An export read back, with the outputs found for it. */
struct GradeSet {
  macv_caps caps{};
  uint64_t nonce = 0;
  std::string matrix_fnv1a;
  std::vector<CaseSpec> cases;                //!< every case of the export
  std::map<int, std::string> not_applicable;  //!< case id → reason
  std::string outputs_dir;
  std::string outputs_sha256;  //!< over the output files present, in case order
  std::string declared_name;   //!< from the output files (the same in all)
  std::string declared_version;
  int outputs_found = 0;
};

/*! \brief Reads `dir`'s manifest and hashes the output files in `outputs_dir` (default
 *  DIR/outputs). InputError on a missing manifest, a schema/version mismatch, or outputs that
 *  declare different names or versions. */
GradeSet read_grade_set(const std::string& dir, const std::string& outputs_dir = {});

/*! \brief The implementation whose results are the output files: each case's outputs are
 *  loaded into the ABI arena step by step and checked as a plugin's are (abi::AbiCase); a
 *  case without outputs is an ERROR, one the export found not applicable is NOT APPLICABLE. */
std::unique_ptr<Implementation> make_file_impl(const GradeSet& set, const std::string& dir);

}  // namespace mac::verify::files
