#include "bench_train_run.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>

#include "bench_child.h"
#include "bench_programs.h"
#include "bench_trainer.h"
#include "common/check.h"
#include "common/clock.h"
#include "info/info_system.h"
#include "launcher/process.h"

namespace gyre::app {
namespace {

// The python3 that imports torch with gloo, or "" and `why` says what was tried. A --python that
// does not is a usage error.
std::string findTorchPython(const TrainBenchFlags& f, std::string& why) {
  const std::vector<std::string> candidates =
      f.python.empty() ? std::vector<std::string>{"python3", "/usr/bin/python3"} : std::vector{f.python};
  const std::string probe =
      "import numpy, torch, torch.distributed as d; assert d.is_gloo_available(), 'no gloo'";
  for (const std::string& python : candidates) {
    const std::string path = launcher::findExecutable(python);
    if (path.empty()) {
      why += fmt::format("{}{}: not found", why.empty() ? "" : "; ", python);
      continue;
    }
    info::CommandOptions options;
    options.timeout = std::chrono::seconds(60);
    const info::CommandResult r = info::runCommand({path, "-c", probe}, options);
    if (r.ok()) return path;
    std::string last = r.output.empty() ? r.error : r.output;  // the exception's line
    while (!last.empty() && last.back() == '\n') last.pop_back();
    if (const auto nl = last.rfind('\n'); nl != std::string::npos) last = last.substr(nl + 1);
    why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", path, last);
  }
  GYRE_USAGE_CHECK(f.python.empty(), "--python ", f.python, " cannot run the DDP baseline: ", why);
  return "";
}

}  // namespace

TrainPrograms findTrainPrograms(const TrainBenchFlags& f, bool ddp) {
  TrainPrograms p;
  p.self = launcher::selfExecutable();
  if (!f.worker.empty()) {
    p.worker = givenProgram("--worker", f.worker);
  } else {
    requireTrainWorker("gyre bench train", ", or pass --worker PATH");
    p.worker = trainWorkerBesideTool();
  }
  if (!ddp) return p;
  p.ddpScript = besideTool("gyre_ddp_train.py");
  GYRE_USAGE_CHECK(std::filesystem::exists(p.ddpScript), "--baseline ddp needs ", p.ddpScript,
                   ", which the build copies there from bench/ddp_train.py (build target gyre)");
  std::string why;
  p.python = findTorchPython(f, why);
  if (p.python.empty())
    p.ddpSkipped = "skipped: no python3 with torch (install python3-torch; or pass --python PATH): " + why;
  return p;
}

RunFigures runTrainConfig(const TrainConfig& c, const TrainBenchFlags& f, const TrainPrograms& p) {
  launcher::ChildSpec spec;
  spec.name = fmt::format("{} {} (world {})", c.model, c.label(), c.world);
  spec.env = threadEnvironment(c.threads);
  spec.ownProcessGroup = true;  // stopping it stops gyre run's workers or DDP's processes too
  spec.argv = trainRunArgv(c, f, p);
  spec.path = spec.argv.front();

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) GYRE_THROW(SystemError, "pipe2 failed");
  spec.stdoutFd = fds[1];  // stderr stays ours: the workers' errors show as they happen
  launcher::ProcessGroup group;
  group.spawn(spec);
  close(fds[1]);
  // The JSON epoch lines are kept; the worker's human lines (its epoch summary) are not shown.
  std::vector<RunFigures> epochs;
  const launcher::SuperviseResult result = launcher::supervise(
      group, fds[0], Deadline::after(std::chrono::milliseconds(static_cast<long>(f.timeoutS * 1000))), "",
      [&](const std::string& line) {
        if (std::optional<RunFigures> e = parseEpochLine(line)) epochs.push_back(*e);
      });
  close(fds[0]);
  if (!result.ok) throw RunFailed(result.error, result.exitCode);
  if (epochs.empty()) throw RunFailed(spec.name + " exited without printing its figures", 1);
  RunFigures figures = combineEpochs(epochs);
  // Plain loops side by side: each printed its own epochs; together they did W times one's mean.
  if (c.runner == TrainRunner::kPlain && c.world > 1) figures.samplesPerS *= c.world;
  return figures;
}

}  // namespace gyre::app
