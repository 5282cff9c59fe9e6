// One measured size of `gyre bench collectives`, its JSON form (what rank 0 sends the parent and
// what --json prints) and the human table.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "bench_options.h"

namespace gyre::app {

struct BenchRow {
  std::uint64_t bytes = 0;
  std::uint64_t count = 0;
  double timeUs = 0;  // max over ranks of the average time per call
  std::string op;
  std::string algo;
  std::string dtype;
  std::string redop;
  std::string transport;
  int np = 0;
  bool inplace = true;
  int iters = 0;
  std::optional<bool> checkOk;      // set with --check
  std::optional<double> mpiTimeUs;  // set with --baseline mpi

  double algbwGBps() const;
  double busbwGBps() const;
  std::optional<double> mpiBusbwGBps() const;
  // gyre busbw / MPI busbw, which is MPI time / gyre time (also for barrier).
  std::optional<double> ratio() const;
};

nlohmann::json toJson(const BenchRow& row);
// Reads a row written by toJson (derived fields are recomputed). Throws nlohmann::json errors.
BenchRow rowFromJson(const nlohmann::json& j);

// OpenMPI's time for the row's size (--baseline mpi: bytes -> microseconds per call), when it
// measured that size.
void addMpiTime(BenchRow& row, const std::map<std::uint64_t, double>& mpiTimeUs);

// "3 of 12 checks FAILED (see the messages above)".
std::string failedChecksText(std::size_t failedChecks, std::size_t rows);
// Why a sweep whose ranks all exited is a failure: "the ranks exited after 5 of 12 results" when
// rows are missing, failedChecksText when a check failed; "" when neither.
std::string sweepShortfall(const BenchOptions& o, std::size_t rows, std::size_t failedChecks);

// Prints rows as a table (header first) or as JSON lines, flushing after each.
class BenchPrinter {
 public:
  BenchPrinter(const BenchOptions& options, bool withMpi, std::FILE* out = stdout);
  void header();
  void row(const BenchRow& row);

 private:
  const BenchOptions& options_;
  bool withMpi_;
  std::FILE* out_;
};

}  // namespace gyre::app
