// `gyre bench comm` apart from running anything: its settings and their checks, the runs (every
// gradient compression × every allreduce algorithm asked for), each run's `gyre run` command line,
// and the table and JSON of their figures. No processes, so tests/unit/bench_comm_test.cc checks
// it on its own; bench_comm.cc runs the plan.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench_ps_plan.h"  // EvalPoint, TimeToAccuracy: a run's eval.jsonl

namespace gyre::app {

struct CommSettings : AccuracyJob {
  CommSettings() {
    evalEvery = 20;
    threads = 1;
    runTimeoutS = 1800;
  }
  std::vector<std::string> compressions = {"none", "fp16", "bf16", "topk:0.01", "powersgd:4"};
  std::vector<std::string> algorithms = {"auto"};
  int np = 0;                    // workers; 0: 2 on this host, or every slot of the hosts
  std::string hosts;             // gyre run -H; empty: np workers on this host (loopback)
  std::string rshAgent;          // gyre run --rsh-agent (empty: its default)
  std::string networkInterface;  // gyre run --network-interface (empty: none)
};

// "none,fp16,topk:0.01": compressions as gyre train reads them (src/common/compression_spec.h),
// none twice. Throws InvalidArgument naming --compressions.
std::vector<std::string> parseCompressionList(const std::string& text);
// "auto,ring": allreduce algorithms (parseAllreduceAlgorithm), none twice. Throws InvalidArgument.
std::vector<std::string> parseAlgorithmList(const std::string& text);
// Throws InvalidArgument.
void validate(const CommSettings& s);

struct CommRun {
  std::string compression;
  std::string algorithm;
  std::string label() const;    // "topk:0.01 ring"
  std::string dirName() const;  // "topk-0.01-ring"
};

// Top-k and PowerSGD reduce with collectives of their own (the buckets' algorithm does not apply).
bool ownCollectives(const std::string& compression);
// Every compression with every algorithm, compression by compression, in the order given; top-k
// and PowerSGD once, with auto.
std::vector<CommRun> planCommRuns(const CommSettings& s);

// The arguments after the gyre program: {"run", "-np", ..., "--", worker, "--model", ...}.
std::vector<std::string> commRunArguments(const CommSettings& s, const CommRun& run,
                                          const std::string& worker, const std::string& runDir);

struct CommRow {
  CommRun run;
  bool ok = false;
  std::string error;
  std::string runDir;
  TimeToAccuracy tta;
  double samplesPerS = 0;          // training only, evaluations left out (trainingSamplesPerS)
  double bytesPerStep = 0;         // gradient bytes a worker put into the collectives per step
  std::optional<double> finalAcc;  // the last epoch's test accuracy (the whole test set)
};

// A run's figures from its eval.jsonl and metrics.jsonl lines. Throws Error on malformed lines;
// an empty eval.jsonl is an error too (the run needs --eval-every).
CommRow parseCommRun(const CommSettings& s, const CommRun& run, const std::vector<std::string>& evalLines,
                     const std::vector<std::string>& metricsLines);

// The header, a row per run, and the speedup of each run's time to the target over the first
// run's (the first compression with the first algorithm: the baseline).
std::string commHeader(const CommSettings& s);
std::string commRowText(const CommRow& row, const CommRow* baseline);
nlohmann::json commJson(const CommSettings& s, const std::vector<CommRow>& rows);

}  // namespace gyre::app
