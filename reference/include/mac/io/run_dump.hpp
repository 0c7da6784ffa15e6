#pragma once
/*! \file run_dump.hpp
 *  \brief HDF5 reader/writer for the run dump of mac-sim (schema "mac-run", version 1):
 *         one layer of one trace run through the decode stepper. The schema is documented
 *         in docs/file-formats.md; the attribute and dataset names are mac/io/schema.hpp.
 *
 *  The writer goes through write_h5_atomically (mac/io/atomic_file.hpp): never a half file.
 *  The reader rejects an unknown schema/version and shape mismatches with one InputError
 *  naming the file and dataset.
 */
#include "mac/ref/common.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace mac::io {

/*! \brief Run dump of one layer of one trace (docs/file-formats.md), over decode steps S and
 *  query heads Hq. All arrays row-major. */
struct RunDump {
  StepperConfig config;  //!< the run's configuration, echoed as root attributes
  int64_t layer = 0;
  std::string trace_source;

  int64_t steps = 0, num_q_heads = 0, head_dim = 0;
  std::vector<int64_t> position;   //!< [S]
  std::vector<int8_t> hit;         //!< [S, Hq]
  std::vector<int64_t> match_pos;  //!< [S, Hq], −1 on miss
  std::vector<double>
      d2;  //!< [S, Hq], canonical FP32 distance of the nearest candidate (NaN if none)
  std::vector<double> out;              //!< [S, Hq, D]
  std::vector<double> lse;              //!< [S, Hq], natural log
  std::vector<double> exact_out;        //!< [S, Hq, D], full attention, FP64
  std::vector<double> exact_lse;        //!< [S, Hq], natural log
  std::vector<int64_t> kv_tokens_read;  //!< [S, Hq]

  /*! \brief Allocates arrays for S steps (NaN/−1/0 filled). */
  void resize(int64_t S, int64_t hq, int64_t d);
};

/*! \brief Writes a run dump (temporary name, then rename). */
void write_run_dump(const std::string& path, const RunDump& dump);
/*! \brief Reads a run dump, checking schema, version and shapes. */
RunDump read_run_dump(const std::string& path);

}  // namespace mac::io
