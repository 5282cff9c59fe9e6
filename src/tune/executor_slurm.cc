// The Slurm executor (executor.h): sbatch to start, squeue to follow, scontrol to read how a job
// ended, scancel to stop. No accounting database is needed (sacct would need slurmdbd); a job's
// state stays in slurmctld for MinJobAge seconds (300 by default) after it ends, and squeue is
// asked every half second.
#include <fmt/format.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "common/clock.h"
#include "gyre/errors.h"
#include "launcher/command.h"
#include "tune/executor.h"

namespace gyre::tune {
namespace {

namespace fs = std::filesystem;

constexpr auto kCommandTimeout = std::chrono::seconds(30);
constexpr auto kUnreachableAfter = std::chrono::seconds(30);

std::string quoted(const std::string& word) {
  std::string q(1, '\'');
  for (char c : word) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  q += '\'';
  return q;
}

std::string commandLine(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& w : argv) {
    if (!s.empty()) s += ' ';
    s += quoted(w);
  }
  return s;
}

launcher::CommandResult run(const std::vector<std::string>& argv) {
  launcher::CommandOptions o;
  o.timeout = kCommandTimeout;
  return launcher::runCommand(argv, o);
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

[[noreturn]] void unreachable(const std::vector<std::string>& argv, const launcher::CommandResult& r) {
  throw Error(fmt::format("Slurm is not reachable: `{}` failed ({}): {}", commandLine(argv),
                          r.error.empty() ? "no output" : r.error, trimmed(r.output)));
}

// "JobState=FAILED ... ExitCode=3:0" from `scontrol show job -o ID`.
std::string field(const std::string& text, const std::string& name) {
  const std::string key = fmt::format(" {}=", name);
  const std::size_t at = fmt::format(" {}", text).find(key);
  if (at == std::string::npos) return "";
  const std::size_t start = at + key.size() - 1;
  return text.substr(start, text.find_first_of(" \n", start) - start);
}

class SlurmExecutor final : public Executor {
 public:
  explicit SlurmExecutor(const SlurmOptions& o) : o_(o) {
    std::vector<std::string> query = {"sinfo", "-h", "-o", "%P %C"};
    if (!o.partition.empty()) query.insert(query.end(), {"-p", o.partition});
    const launcher::CommandResult r = run(query);
    if (!r.ok()) unreachable(query, r);
    // "debug* allocated/idle/other/total", a line per partition: the one asked for, else the
    // default (marked *), where the jobs go.
    int total = 0;
    std::istringstream in(r.output);
    std::string line;
    while (std::getline(in, line)) {
      const std::size_t space = line.find(' '), slash = line.rfind('/');
      if (space == std::string::npos || space == 0 || slash == std::string::npos) continue;
      if (o.partition.empty() ? line[space - 1] == '*' : true) total = std::atoi(line.c_str() + slash + 1);
    }
    if (total <= 0)
      throw Error(fmt::format("Slurm has no CPUs{}{}: `{}` printed \"{}\"",
                              o.partition.empty() ? "" : " in partition ", o.partition, commandLine(query),
                              trimmed(r.output)));
    slots_ = o.slots > 0 ? o.slots : total;
    prefix_ =
        fmt::format("gyre-tune-{:08x}-", static_cast<std::uint32_t>(std::hash<std::string>{}(o.experiment)));
    cancelLeftovers();
  }
  ~SlurmExecutor() override {
    try {
      stopAll();
    } catch (...) {
    }
  }

  std::string describe() const override {
    return fmt::format("slurm{}{}, {} slot{}", o_.partition.empty() ? "" : " partition ", o_.partition,
                       slots_, slots_ == 1 ? "" : "s");
  }
  int capacity() const override { return slots_; }
  int freeSlots() const override {
    int used = 0;
    for (const auto& [trial, job] : jobs_) used += job.slots;
    return slots_ - used;
  }

  std::string start(const RunSpec& spec) override {
    const fs::path dir = fs::path(spec.logPath).parent_path();
    const fs::path script = dir / "run.sbatch";
    std::string text = fmt::format("#!/bin/sh\n# gyre tune: a run of trial {}\n", spec.trial);
    for (const auto& [name, value] : spec.env) text += fmt::format("export {}={}\n", name, quoted(value));
    text += fmt::format("cd {} || exit 1\n", quoted(fs::current_path().string()));
    if (spec.slots > 1 && !spec.startsItsWorkers)
      text +=
          fmt::format("exec srun --ntasks={} --kill-on-bad-exit=1 {}\n", spec.slots, commandLine(spec.argv));
    else
      text += fmt::format("exec {}\n", commandLine(spec.argv));
    {
      std::ofstream out(script);
      out << text;
      if (!out) throw SystemError("cannot write " + script.string());
    }
    std::vector<std::string> argv = {"sbatch", "--parsable",
                                     fmt::format("--job-name={}{}", prefix_, spec.trial),
                                     fmt::format("--output={}", spec.logPath), "--open-mode=append",
                                     // A requeued job would run beside the retry the tuner starts.
                                     "--no-requeue"};
    if (!o_.partition.empty()) argv.push_back(fmt::format("--partition={}", o_.partition));
    if (spec.startsItsWorkers) {
      argv.insert(argv.end(), {"--ntasks=1", fmt::format("--cpus-per-task={}", spec.slots)});
    } else {
      argv.push_back(fmt::format("--ntasks={}", spec.slots));
    }
    argv.push_back(script.string());
    const launcher::CommandResult r = run(argv);
    const std::string id = trimmed(r.output).substr(0, trimmed(r.output).find(';'));
    if (!r.ok() || id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
      throw Error(fmt::format("`{}` failed ({}): {}", commandLine(argv),
                              r.error.empty() ? "no job id" : r.error, trimmed(r.output)));
    jobs_[spec.trial] = Job{id, spec.slots, Clock::now(), false};
    return fmt::format("slurm job {}", id);
  }

  void stop(int trial, std::chrono::milliseconds) override {
    auto it = jobs_.find(trial);
    if (it == jobs_.end() || it->second.stopping) return;
    it->second.stopping = true;
    run({"scancel", it->second.id});  // Slurm sends SIGTERM, then SIGKILL after its KillWait
  }

  std::vector<RunEnd> wait(std::chrono::milliseconds timeout) override {
    const auto next = lastPoll_ + o_.poll;
    if (Clock::now() < next) {
      std::this_thread::sleep_for(std::min<Clock::duration>(timeout, next - Clock::now()));
      if (Clock::now() < next) return {};
    }
    lastPoll_ = Clock::now();
    if (jobs_.empty()) return {};
    std::string ids;
    for (const auto& [trial, job] : jobs_) {
      if (!ids.empty()) ids += ',';
      ids += job.id;
    }
    const std::vector<std::string> argv = {"squeue", "-h", "-o", "%i %T", "-j", ids};
    const launcher::CommandResult r = run(argv);
    // squeue -j fails for ids that all left the queue ("Invalid job id specified"): then every
    // job ended.
    const bool allGone = !r.ok() && r.output.find("Invalid job id") != std::string::npos;
    if (!r.ok() && !allGone) {
      if (!failingSince_) failingSince_ = Clock::now();
      if (Clock::now() - *failingSince_ > kUnreachableAfter) unreachable(argv, r);
      return {};
    }
    failingSince_.reset();
    std::map<std::string, std::string> states;
    std::istringstream in(allGone ? "" : r.output);
    std::string id, state;
    while (in >> id >> state) states[id] = state;
    std::vector<RunEnd> ended;
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      const auto s = states.find(it->second.id);
      if (s != states.end() && !finished(s->second)) {
        ++it;
        continue;
      }
      ended.push_back(endOf(it->first, it->second));
      it = jobs_.erase(it);
    }
    return ended;
  }

  void stopAll() override {
    if (jobs_.empty()) return;
    std::vector<std::string> argv = {"scancel"};
    for (const auto& [trial, job] : jobs_) argv.push_back(job.id);
    run(argv);
    // Wait for them to leave the queue (bounded): nothing of the experiment outlives it.
    const Deadline deadline = Deadline::after(std::chrono::seconds(20));
    while (!jobs_.empty() && !deadline.expired()) {
      for (auto& [trial, job] : jobs_) job.stopping = true;
      wait(o_.poll);
    }
    jobs_.clear();
  }

 private:
  struct Job {
    std::string id;
    int slots = 1;
    Clock::time_point started;
    bool stopping = false;
  };

  // squeue's state of a job that will not run again (scontrol then says how it ended).
  static bool finished(const std::string& state) {
    for (const char* done : {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                             "PREEMPTED", "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED"})
      if (state == done) return true;
    return false;
  }

  // Jobs of an earlier tuner of this experiment that died without cancelling them.
  void cancelLeftovers() const {
    const launcher::CommandResult r = run({"squeue", "--me", "-h", "-o", "%i|%j"});
    if (!r.ok()) return;
    std::vector<std::string> argv = {"scancel"};
    std::istringstream in(r.output);
    std::string line;
    while (std::getline(in, line)) {
      const std::size_t bar = line.find('|');
      if (bar != std::string::npos && line.compare(bar + 1, prefix_.size(), prefix_) == 0)
        argv.push_back(line.substr(0, bar));
    }
    if (argv.size() > 1) {
      std::fprintf(stderr, "gyre tune: cancelling %zu Slurm job%s an earlier tuner of this experiment left\n",
                   argv.size() - 1, argv.size() == 2 ? "" : "s");
      run(argv);
    }
  }

  RunEnd endOf(int trial, const Job& job) const {
    RunEnd e;
    e.trial = trial;
    e.stopped = job.stopping;
    e.seconds = secondsSince(job.started);
    const launcher::CommandResult r = run({"scontrol", "show", "job", "-o", job.id});
    const std::string exit = field(r.output, "ExitCode");  // "3:0": code, signal
    const std::string state = field(r.output, "JobState");
    if (!r.ok() || exit.empty()) {
      e.code = -1;
      e.signal = 0;
      return e;
    }
    const int code = std::atoi(exit.c_str());
    const int signal = std::atoi(exit.c_str() + exit.find(':') + 1);
    if (signal != 0) {
      e.signal = signal;
    } else if (state == "CANCELLED" || state == "TIMEOUT" || state == "NODE_FAIL" ||
               state == "OUT_OF_MEMORY") {
      e.signal = SIGTERM;
    } else {
      e.code = code;
    }
    return e;
  }

  SlurmOptions o_;
  int slots_ = 0;
  std::string prefix_;
  std::map<int, Job> jobs_;
  Clock::time_point lastPoll_{};
  std::optional<Clock::time_point> failingSince_;
};

}  // namespace

std::unique_ptr<Executor> makeSlurmExecutor(const SlurmOptions& o) {
  return std::make_unique<SlurmExecutor>(o);
}

}  // namespace gyre::tune
