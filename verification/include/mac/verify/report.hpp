#pragma once
/*! \file report.hpp
 *  \brief The certification report (HDF5, schema "mac-verify", version 1; documented in
 *         docs/verification.md), shard merging, the human-readable summary and the
 *         failure reproducer file.
 */
#include "mac/verify/check.hpp"

#include <string>
#include <vector>

namespace mac::verify {

/*! \brief Run-level attributes of a report. */
struct ReportMeta {
  std::string git_commit;       //!< MAC_GIT_COMMIT of the build
  std::string declared_commit;  //!< MAC_VERIFY_COMMIT as declared by the runner (not verified)
  std::string device;           //!< e.g. "NVIDIA H200 (sm_90)" or "cpu"
  std::string mode;             //!< "cpu" | "gpu" | "model"
  std::string impl;             //!< implementation name
  // What was certified, for an implementation from outside the driver (plugin or file
  // protocol); empty for the built-in ones.
  std::string impl_sha256;    //!< SHA-256 of the plugin's shared object, or of the graded outputs
  std::string impl_declared;  //!< the implementation's declared name and version
  std::string impl_caps;      //!< its declared capabilities (abi::caps_to_text)
  int abi_version = 0;        //!< plugin ABI version (0: built into the driver)
  uint64_t nonce = 0;         //!< mixed into every case's seed (0: the matrix's own seeds)
  std::string nonce_source = "none";  //!< "drawn" by this run, "given" (--nonce), "replay",
                                      //!< "export" (--grade) or "none"
  int trials = 1;                     //!< runs of every case (--trials), each its own nonce
  std::string grading;  //!< what the outputs were graded against (abi::grading_text; "" built in)
  std::string subset;   //!< "all", "smoke", "case:ID", ...
  std::string shard = "0/1";
  std::string command;      //!< the command line
  std::string created;      //!< UTC time the run started
  std::string finished;     //!< UTC time it ended
  std::string environment;  //!< machine and build: CPU, GPU, CUDA, compiler and flags (lines)
  std::string matrix_sha;   //!< FNV-1a 64 of the matrix text (hex)
  Tolerances tol;
  double wall_s = 0;
  int threads = 0;
};

/*! \brief A report in memory: one entry per case that ran (or was skipped). */
struct Report {
  ReportMeta meta;
  std::vector<CaseResult> cases;  //!< sorted by case id; heads filled, steps empty
  int count(CaseStatus s) const;
  bool ok() const { return count(CaseStatus::kFail) == 0 && count(CaseStatus::kError) == 0; }
  /*! \brief The certificate's verdict: "FAIL" if a case failed or erred; else "INCOMPLETE"
   *  if a case was skipped (time limit, caps) or no case was applicable; else "PASS" (every
   *  applicable case ran and passed; not-applicable cases never count as passed). */
  std::string result() const;
  /*! \brief Exit status of the verdict: PASS 0, FAIL 1, INCOMPLETE 3. */
  int exit_code() const;
};

/*! \brief Writes `r` to `path` atomically (temporary name, then rename). */
void write_report(const std::string& path, const Report& r);
/*! \brief Reads a report written by write_report (InputError on a schema/version mismatch). */
Report read_report(const std::string& path);
/*! \brief Merges shard reports: cases concatenated and sorted by id (InputError on a case
 *  that appears twice or on mixed commits/modes); wall_s is the maximum of the shards. */
Report merge_reports(const std::vector<Report>& shards);

/*! \brief The human-readable certificate (Markdown) written beside the HDF5 report: the
 *  verdict, identity (implementation, commits, matrix hash, nonce and where it came from,
 *  trials), environment, tolerances, per family pass/fail/skip/error/not-applicable counts
 *  with the worst errors, and for every failing case its message and the command that
 *  replays it: the case's own CaseResult::replay (kept in the report, so a merge of shards
 *  carries it), else `replays[k]` for the k-th failing case in report order. */
std::string certificate_markdown(const Report& r, const std::vector<std::string>& replays,
                                 const std::string& environment);

/*! \brief Human-readable summary: a per-family table and the failing cases. */
std::string summary_table(const Report& r);

/*! \brief Writes the reproducer of a failed case: the case line, its inputs (per request
 *  q_pre, q_post, k, v; unless larger than `max_input_bytes`, when only the seed-determined
 *  case line is kept), and per step the implementation's and the expected outputs. */
void write_failure_file(const std::string& path, const CaseResult& res, const ReportMeta& meta,
                        size_t max_input_bytes = size_t(512) << 20);
/*! \brief The case line stored in a failure file (for --replay). */
std::string read_failure_case_line(const std::string& path);

/*! \brief A nonce as the report and the replay commands write it: 0x and 16 hex digits. */
std::string nonce_text(uint64_t nonce);

/*! \brief The nonce stored in a failure file (0 if none). */
uint64_t read_failure_nonce(const std::string& path);

/*! \brief FNV-1a 64-bit hash of a text, as 16 hex digits. */
std::string fnv1a_hex(const std::string& text);

}  // namespace mac::verify
