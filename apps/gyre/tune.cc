#include "tune.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "common/check.h"
#include "common/strings.h"
#include "gyre/errors.h"
#include "launcher/agent.h"
#include "launcher/hosts.h"
#include "launcher/process.h"
#include "run_dir.h"
#include "train/options.h"
#include "tune/executor.h"
#include "tune/runner.h"
#include "tune/space_file.h"
#include "tune/trial_command.h"

namespace gyre::app {
namespace {

namespace fs = std::filesystem;

struct TuneFlags {
  std::vector<std::string> params;
  std::string spaceFile;
  tune::SearcherOptions search;
  tune::SchedulerOptions scheduler;
  std::string mutations;
  std::string metric = "accuracy";
  std::string mode = "max";
  int slots = 0;
  bool slurm = false;
  std::string partition;
  std::string hosts;
  std::string rshAgent = "ssh -o BatchMode=yes";
  int np = 1;
  int threads = 1;
  int maxFailures = 1;
  std::string dir;
  std::string resume;
  bool json = false;
  std::string progress = "auto";
};

// The gyre train flags given to gyre tune: checked now with gyre train's own table, so a typo
// stops the experiment before any trial starts.
void checkTrainArgs(const std::vector<std::string>& args) {
  for (const std::string own : {"--epochs", "--np", "--threads", "--run-dir", "--checkpoint-dir", "--resume",
                                "--progress", "--keep-last"})
    for (const std::string& a : args)
      GYRE_USAGE_CHECK(
          a != own && a.rfind(own + "=", 0) != 0, a,
          " is set by gyre tune for each trial (--max-t/--epochs, --np and --threads are gyre tune's own)");
  CLI::App check{"gyre train"};
  train::TrainOptions o;
  train::addTrainFlags(check, o, train::FlagScope::kLauncher);
  // With what gyre tune adds to every trial, so that flags that need them pass.
  std::vector<std::string> all = args;
  for (const char* added : {"--checkpoint-dir", "trial/ckpt", "--resume", "--run-dir", "trial"})
    all.push_back(added);
  std::vector<std::string> reversed(all.rbegin(), all.rend());
  try {
    check.parse(reversed);
  } catch (const CLI::ParseError& e) {
    GYRE_USAGE_ERROR("gyre tune passes unknown options on to gyre train, which refuses them: ", e.what());
  }
  train::validateOptions(o);
}

// "a,,b," -> {"a", "b"}.
std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> out = split(text, ',');
  std::erase(out, "");
  return out;
}

tune::ExperimentSpec buildSpec(const TuneFlags& f, const std::vector<std::string>& trainArgs,
                               const std::vector<std::string>& command) {
  tune::ExperimentSpec spec;
  if (!f.spaceFile.empty()) spec.space = tune::loadSpaceFile(f.spaceFile);
  for (const std::string& p : f.params)
    spec.space.add(tune::parseParam(p, "--param " + p.substr(0, p.find('='))));
  GYRE_USAGE_CHECK(!spec.space.params.empty(),
                   "give the search space: --param NAME=DIST:ARGS (repeated) or --space FILE");
  spec.search = f.search;
  spec.scheduler = f.scheduler;
  spec.scheduler.mutations = splitList(f.mutations);
  spec.scheduler.seed = f.search.seed;
  spec.metric = f.metric;
  spec.mode = f.mode;
  spec.np = f.np;
  spec.threads = f.threads;
  spec.maxFailures = f.maxFailures;
  spec.builtin = command.empty();
  spec.command = command;
  spec.trainArgs = trainArgs;
  if (spec.builtin) {
    checkTrainArgs(trainArgs);
    for (const tune::Param& p : spec.space.params) {
      const std::string flag = tune::trainFlag(p.name);
      GYRE_USAGE_CHECK(flag != "--np" && flag != "--epochs" && flag != "--threads", p.where, ": ", p.name,
                       " is gyre tune's own (--np, --max-t, --threads)");
      // Every value the parameter can take must be one gyre train accepts.
      std::vector<std::string> probe = trainArgs;
      probe.push_back(flag);
      probe.push_back(
          tune::formatValue(p.numeric() && p.values.empty() ? tune::Json(p.low) : p.values.front()));
      try {
        checkTrainArgs(probe);
      } catch (const InvalidArgument& e) {
        GYRE_USAGE_ERROR(p.where, ": parameter ", p.name, " is not a gyre train flag it can set (", e.what(),
                         ")");
      }
      // Named mutations are checked below; without any, pbt mutates every parameter.
      GYRE_USAGE_CHECK(
          f.scheduler.name != "pbt" || !spec.scheduler.mutations.empty() || !tune::fixedOnResume(p.name),
          p.where, ": pbt would mutate ", p.name,
          ", which a gyre train checkpoint cannot change on resume; name the parameters to mutate with "
          "--pbt-mutate (e.g. --pbt-mutate lr,momentum)");
    }
    for (const std::string& m : spec.scheduler.mutations)
      GYRE_USAGE_CHECK(
          !tune::fixedOnResume(m), "--pbt-mutate ", m,
          ": a gyre train checkpoint cannot change it on resume (model, batch, seed, optimizer, sync-bn)");
  } else {
    if (!trainArgs.empty())
      GYRE_USAGE_ERROR("gyre train flags (", trainArgs.front(),
                       ") are for built-in trials; a command after -- gets its options itself");
    GYRE_USAGE_CHECK(!launcher::findExecutable(command.front()).empty(), "the trial command ",
                     command.front(), " is not found (not an executable file, nor on PATH)");
  }
  GYRE_USAGE_CHECK(f.mode == "max" || f.mode == "min", "--mode must be max or min; got ", f.mode);
  // Both fail here rather than in the loop.
  tune::makeSearcher(spec.search, spec.space);
  tune::makeScheduler(spec.scheduler, spec.space);
  return spec;
}

int tuneMain(const TuneFlags& f, const std::vector<std::string>& trainArgs,
             const std::vector<std::string>& command, const CLI::App& cmd) {
  const std::string gyre = launcher::selfExecutable();
  tune::ExperimentSpec spec;
  std::string dir;
  if (!f.resume.empty()) {
    for (const char* flag : {"--param", "--space", "--samples", "--search", "--scheduler", "--metric",
                             "--mode", "--np", "--max-t", "--dir"})
      GYRE_USAGE_CHECK(cmd.count(flag) == 0, flag,
                       " cannot change on --resume: the experiment keeps its own (", f.resume,
                       "/experiment.json)");
    GYRE_USAGE_CHECK(trainArgs.empty() && command.empty(),
                     "--resume takes the experiment as it was: no train flags or command");
    dir = fs::absolute(f.resume).string();
    spec = tune::ExperimentFiles(dir).loadSpec();
  } else {
    spec = buildSpec(f, trainArgs, command);
    dir = fs::absolute(f.dir.empty() ? uniqueRunDir("tune") : fs::path(f.dir)).string();
  }
  if (spec.builtin) {
    const std::string worker = (fs::path(gyre).parent_path() / "gyre_train_worker").string();
    if (::access(worker.c_str(), X_OK) != 0)
      throw Error("this gyre was built without the trainer (" + worker +
                  " is missing): built-in trials need it; give a command after -- instead");
  }
  GYRE_USAGE_CHECK(f.hosts.empty() || f.slots == 0, "give --slots (this host) or -H (other hosts), not both");
  GYRE_USAGE_CHECK(!f.slurm || f.hosts.empty(), "give --slurm or -H, not both");
  GYRE_USAGE_CHECK(f.slurm || f.partition.empty(), "--partition is for --slurm");
  std::unique_ptr<tune::Executor> executor;
  if (f.slurm) {
    tune::SlurmOptions so;
    so.partition = f.partition;
    so.slots = f.slots;
    so.experiment = dir;
    executor = tune::makeSlurmExecutor(so);
  } else if (!f.hosts.empty()) {
    executor = tune::makeHostsExecutor(launcher::parseHostList(f.hosts), gyre, f.rshAgent);
  } else {
    executor = tune::makeLocalExecutor(f.slots > 0 ? f.slots : std::max(1, launcher::usableCores()), gyre);
  }
  GYRE_USAGE_CHECK(spec.np <= executor->freeSlots(), "--np ", spec.np, " is more than one run can have (",
                   executor->describe(), "): no trial could start");
  const tune::ExperimentFiles files(dir);
  if (f.resume.empty()) files.create(spec);
  launcher::installInterruptHandlers();
  tune::RunnerOptions o;
  o.gyre = gyre;
  o.resume = !f.resume.empty();
  o.live = f.progress == "on" || (f.progress == "auto" && ::isatty(STDOUT_FILENO));
  o.json = f.json;
  return tune::runExperiment(spec, files, *executor, o);
}

}  // namespace

void addTune(CLI::App& app, std::function<int()>& action, const std::vector<std::string>& command) {
  auto f = std::make_shared<TuneFlags>();
  CLI::App* cmd = app.add_subcommand("tune",
                                     "Hyperparameter search: many trials of gyre train (or of a command), "
                                     "with ASHA, HyperBand, median stopping or PBT");
  cmd->allow_extras();  // gyre train's flags, for every built-in trial
  cmd->add_option(
         "--param", f->params,
         "A hyperparameter and its distribution, NAME=DIST:ARGS: uniform:LOW:HIGH, loguniform:LOW:HIGH, "
         "quniform:LOW:HIGH:Q, randint:LOW:HIGH (HIGH exclusive), choice:A,B,C or grid:A,B,C (repeat it)")
      ->type_name("NAME=SPEC");
  cmd->add_option("--space", f->spaceFile,
                  "A TOML file of parameters (docs/tune.md), with or besides --param");
  cmd->add_option("--samples", f->search.samples,
                  "Trials: this many times the grid's combinations (Ray's num_samples)")
      ->capture_default_str();
  cmd->add_option("--search", f->search.name, "Where configurations come from: random (with grids) or tpe")
      ->capture_default_str();
  cmd->add_option("--seed", f->search.seed, "Seed of the searcher's and PBT's draws")->capture_default_str();
  cmd->add_option("--tpe-startup", f->search.tpeStartup, "tpe: random trials before the model takes over")
      ->capture_default_str();
  cmd->add_option("--scheduler", f->scheduler.name, "fifo, asha, asha-stop, hyperband, median or pbt")
      ->capture_default_str();
  cmd->add_option(
         "--max-t,--epochs", f->scheduler.maxT,
         "The most iterations a trial trains: epochs of gyre train, reports of a command (Ray's max_t)")
      ->capture_default_str();
  cmd->add_option("--grace-period", f->scheduler.gracePeriod,
                  "asha, asha-stop: the first rung; median: no stop before it")
      ->capture_default_str();
  cmd->add_option("--eta", f->scheduler.eta, "asha, asha-stop, hyperband: the reduction factor")
      ->capture_default_str();
  cmd->add_option("--min-samples", f->scheduler.minSamples, "median: other trials needed at an iteration")
      ->capture_default_str();
  cmd->add_option("--perturbation-interval", f->scheduler.perturbationInterval,
                  "pbt: iterations between exploits")
      ->capture_default_str();
  cmd->add_option("--quantile", f->scheduler.quantile, "pbt: the bottom share exploits the top share")
      ->capture_default_str();
  cmd->add_option("--resample-probability", f->scheduler.resampleProbability,
                  "pbt: the chance a mutated parameter is drawn afresh rather than scaled by 0.8 or 1.2")
      ->capture_default_str();
  cmd->add_option("--pbt-mutate", f->mutations,
                  "pbt: the parameters to mutate, comma-separated (default: all)");
  cmd->add_option("--metric", f->metric, "The reported number to optimize (gyre train: accuracy, loss, ...)")
      ->capture_default_str();
  cmd->add_option("--mode", f->mode, "max or min")->capture_default_str();
  cmd->add_option("--slots", f->slots, "Trials' workers at once on this host (default: its cores)");
  cmd->add_flag(
      "--slurm", f->slurm,
      "Run each trial's runs as Slurm jobs (sbatch; squeue, scontrol, scancel), from inside or outside "
      "an allocation; --slots then bounds the CPUs held at once (default: the partition's)");
  cmd->add_option("--partition", f->partition,
                  "With --slurm: the partition (default: the cluster's default)");
  cmd->add_option(
      "-H,--hosts", f->hosts,
      "Run trials on these hosts instead, host1:2,host2:2 (slots default to 1), through gyre run; "
      "the experiment directory must be shared by them");
  cmd->add_option("--rsh-agent", f->rshAgent, "With -H: how gyre run reaches the hosts")
      ->capture_default_str();
  cmd->add_option("--np", f->np, "Workers of each trial: gyre train's --np, or gyre run -np for a command")
      ->capture_default_str();
  cmd->add_option("--threads", f->threads, "Built-in trials: compute threads per worker")
      ->capture_default_str();
  cmd->add_option("--max-failures", f->maxFailures,
                  "Runs of a trial that may fail and be retried from its checkpoint before it is an ERROR")
      ->capture_default_str();
  cmd->add_option("--dir", f->dir, "The experiment's directory (default: runs/tune-TIME)");
  cmd->add_option("--resume", f->resume,
                  "Finish the experiment in this directory (after the tuner was stopped)");
  cmd->add_flag("--json", f->json, "Also print the summary as one JSON line");
  cmd->add_option("--progress", f->progress, "The live table: auto (on a terminal), on or off")
      ->capture_default_str();
  cmd->footer(
      "Every other option is gyre train's, given to every built-in trial (--model, --batch, --max-steps, "
      "...);\n"
      "a parameter named like a gyre train flag sets it (lr -> --lr). After --, a command runs as the trial\n"
      "instead: {NAME} is replaced by the parameter's value, and it reports through gyre::tune::report()\n"
      "(gyre/tune.h). The experiment directory gets results.jsonl (every report), trials.csv and "
      "state.json;\n"
      "`gyre tune --resume DIR` finishes an experiment whose tuner was stopped. See docs/tune.md.\n\n"
      "Examples:\n"
      "  gyre tune --model mlp --max-steps 60 --param lr=loguniform:0.001:0.3 --param batch=choice:32,64,128 "
      "\\\n"
      "            --samples 9 --scheduler asha --slots 2 --metric accuracy --mode max --dir runs/tune-mlp\n"
      "  gyre tune --model cnn --param lr=grid:0.01,0.03,0.1 --param momentum=grid:0.5,0.9 --max-t 3\n"
      "  gyre tune --param lr=loguniform:1e-4:1e-1 --samples 20 --scheduler asha-stop -- ./train --lr {lr}\n"
      "  gyre tune --slurm --partition debug --np 2 --model cnn --param lr=loguniform:0.01:0.3 --samples 8\n"
      "  gyre tune -H node1:2,node2:2 --model mlp --param lr=loguniform:0.001:0.3 --samples 16 --scheduler "
      "pbt\n"
      "  gyre tune --resume runs/tune-mlp");
  cmd->callback([f, cmd, &action, &command] {
    action = [f, cmd, &command] { return tuneMain(*f, cmd->remaining(), command, *cmd); };
  });
}

}  // namespace gyre::app
