#include "bench_comm.h"

#include <fmt/format.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench_child.h"
#include "bench_comm_plan.h"
#include "bench_trainer.h"
#include "common/check.h"
#include "common/config.h"
#include "gyre/errors.h"
#include "gyre/init.h"
#include "launcher/process.h"

namespace gyre::app {
namespace {

namespace fs = std::filesystem;

struct CommBenchFlags {
  CommSettings settings;
  std::string compressions = "none,fp16,bf16,topk:0.01,powersgd:4";
  std::string algorithms = "auto";
  RunRootFlags runs;
  bool json = false;
};

CommRow runOne(const CommSettings& s, const CommRun& run, const fs::path& dir) {
  const ChildRun child = runTrainingJob("gyre bench comm: " + run.label(),
                                        commRunArguments(s, run, trainWorkerBesideTool(), dir.string()), dir,
                                        "gyre-run.log", s.runTimeoutS + 60);
  CommRow row;
  row.run = run;
  if (child.ok) {
    try {
      row = parseCommRun(s, run, readLines(dir / "eval.jsonl"), readLines(dir / "metrics.jsonl"));
    } catch (const Error& e) {
      row.error = e.what();
    }
  } else {
    row.error = child.error;
  }
  row.runDir = dir.string();
  return row;
}

int runCommBench(CommBenchFlags f) {
  CommSettings& s = f.settings;
  s.compressions = parseCompressionList(f.compressions);
  s.algorithms = parseAlgorithmList(f.algorithms);
  validate(s);
  requireTrainWorker("gyre bench comm");
  requireNoLauncher("gyre bench comm");
  const RunRoot runRoot(f.runs, "gyre bench comm");
  const fs::path& root = runRoot.path();
  launcher::installInterruptHandlers();
  const std::vector<CommRun> runs = planCommRuns(s);
  if (!f.json) fmt::print("{}", commHeader(s));
  std::fflush(stdout);
  std::vector<CommRow> rows;
  bool failed = false;
  try {
    for (std::size_t i = 0; i < runs.size(); ++i) {
      fmt::print(stderr, "gyre bench comm: run {} of {}: {}\n", i + 1, runs.size(), runs[i].label());
      rows.push_back(runOne(s, runs[i], root / runs[i].dirName()));
      failed = failed || !rows.back().ok;
      if (!f.json) fmt::print("{}", commRowText(rows.back(), &rows.front()));
      std::fflush(stdout);
    }
  } catch (const RunFailed& e) {
    fmt::print(stderr, "gyre bench comm: {}\n", e.what());
    return e.code();
  }
  if (f.json) {
    fmt::print("{}\n", commJson(s, rows).dump());
  } else {
    fmt::print(
        "to {}: training time (evaluations left out) to the first evaluation at or above it, every {} steps "
        "of "
        "rank 0; speedup: the first row's time to it over each row's; samples/s: batch x rank 0's steps / "
        "its "
        "training time; final acc: the last epoch's, on the whole test set.\n",
        s.target, s.evalEvery);
  }
  runRoot.done(failed);
  return failed ? 1 : 0;
}

}  // namespace

void addBenchComm(CLI::App& bench, std::function<int()>& action) {
  auto f = std::make_shared<CommBenchFlags>();
  CommSettings& s = f->settings;
  CLI::App* cmd = bench.add_subcommand(
      "comm", "Gradient compression and allreduce algorithms side by side on one training job");
  cmd->footer(
      "Runs gyre_train_worker under `gyre run` once per compression of --compressions and algorithm of\n"
      "--algorithms, one after another, and prints each run's gradient bytes per worker and step,\n"
      "samples/s, the time to reach --target test accuracy (and its speedup over the first row) and the\n"
      "final accuracy. Without --hosts the workers run on this host; with --hosts (and --rsh-agent,\n"
      "--network-interface) wherever gyre run puts them: scripts/compression-bench.sh runs it on\n"
      "network-namespace hosts with links shaped to 1 Gbit/s. See docs/benchmarks.md, \"gyre bench "
      "comm\".\n\n"
      "Examples:\n"
      "  gyre bench comm --np 2 --target 0.85\n"
      "  gyre bench comm --compressions none,powersgd:4 --max-steps 100 --target 0.7   # quick\n"
      "  gyre bench comm -H h1:2,h2:2 --algorithms auto,ring --compressions none   # hierarchical vs flat");
  cmd->add_option("--compressions", f->compressions,
                  "none, fp16, bf16, topk:RATIO, powersgd:RANK, comma-separated")
      ->capture_default_str();
  cmd->add_option("--algorithms", f->algorithms,
                  "Allreduce algorithms of the gradient buckets, comma-separated: auto, ring, "
                  "halving-doubling, tree, naive, hierarchical")
      ->capture_default_str();
  addAccuracyJobOptions(*cmd, s);
  cmd->add_option("--np", s.np, "Workers (0: 2 on this host, or every slot of --hosts)")
      ->capture_default_str();
  cmd->add_option("-H,--hosts", s.hosts,
                  "Hosts and their slots for gyre run (host1:2,host2:2); default: this host");
  cmd->add_option("--rsh-agent", s.rshAgent, "gyre run's --rsh-agent, with --hosts");
  cmd->add_option("--network-interface", s.networkInterface, "gyre run's --network-interface, with --hosts");
  addRunRootOptions(*cmd, f->runs);
  cmd->add_flag("--json", f->json, "One JSON object instead of the table");
  cmd->callback([f, &action] { action = [f] { return runCommBench(*f); }; });
}

}  // namespace gyre::app
