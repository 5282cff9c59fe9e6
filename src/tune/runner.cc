#include "tune/runner.h"

#include <fmt/format.h>

#include <cmath>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>

#include "common/clock.h"
#include "gyre/errors.h"
#include "launcher/process.h"
#include "tune/plots.h"
#include "tune/status_view.h"
#include "tune/trial_command.h"

namespace gyre::tune {
namespace {

namespace fs = std::filesystem;

// A command that reports past its stop point and goes on is stopped this long after.
constexpr auto kReachedGrace = std::chrono::seconds(10);
constexpr auto kStopGrace = std::chrono::milliseconds(5000);

// The last non-empty line of a trial's output, for its error.
std::string lastLine(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last.size() > 300 ? last.substr(0, 300) + "..." : last;
}

// A copy of directory `from` at `to` made of hard links (checkpoint files are never rewritten in
// place), replacing whatever `to` held.
void linkCopy(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  const fs::path tmp = to.string() + ".tmp";
  fs::remove_all(tmp, ec);
  if (!fs::exists(from, ec)) return;
  fs::copy(from, tmp, fs::copy_options::recursive | fs::copy_options::create_hard_links, ec);
  if (ec)
    throw SystemError("cannot copy the checkpoint " + from.string() + " to " + tmp.string() + ": " +
                      ec.message());
  fs::remove_all(to, ec);
  fs::rename(tmp, to, ec);
  if (ec) throw SystemError("cannot rename " + tmp.string() + " to " + to.string() + ": " + ec.message());
}

class Loop {
 public:
  Loop(const ExperimentSpec& spec, const ExperimentFiles& files, Executor& executor, const RunnerOptions& o)
      : spec_(spec),
        files_(files),
        executor_(executor),
        o_(o),
        scheduler_(makeScheduler(spec.scheduler, spec.space)),
        searcher_(makeSearcher(spec.search, spec.space)),
        view_(spec, o.out, o.live),
        started_(Clock::now()) {}

  int run(Summary* summary) {
    if (o_.resume) restore();
    state_.planned = searcher_->total();
    view_.event(fmt::format("gyre tune: {}; {}; {} {}; {}; results in {}", searcher_->describe(),
                            scheduler_->describe(), spec_.mode == "max" ? "maximizing" : "minimizing",
                            spec_.metric, executor_.describe(), files_.dir()));
    int code = 0;
    try {
      code = loop();
    } catch (...) {
      executor_.stopAll();
      forgetRuns();
      save();
      throw;
    }
    save();
    finishSummary(summary);
    const std::string index = writePlots(files_, spec_, state_);
    fmt::print(o_.out, "plots: {}\n", index);
    std::fflush(o_.out);
    return code;
  }

 private:
  struct RunInfo {
    int reached = 0;                    // the highest iteration this run reported
    std::optional<Deadline> stopAfter;  // reached its stop point; stopped if still running then
    bool scheduledStop = false;
  };

  double elapsed() const { return state_.elapsedBefore + secondsSince(started_); }
  Context context() const {
    return {state_.trials, spec_.space, spec_.sign(),
            static_cast<int>(state_.trials.size()) < searcher_->total()};
  }
  Trial& trial(int id) { return state_.trials.at(static_cast<std::size_t>(id)); }
  std::string where() const { return executor_.describe(); }

  void restore() {
    state_ = files_.loadState();
    // Trials created after the last state.json: their trial.json says what they were.
    for (int id = static_cast<int>(state_.trials.size());; ++id) {
      std::ifstream in(fs::path(files_.trialDir(id)) / "trial.json");
      const Json j = Json::parse(in, nullptr, false);
      if (!j.is_object() || !j.contains("config")) break;
      Trial t;
      t.id = id;
      t.config = j.at("config");
      t.np = spec_.np;
      t.status = TrialStatus::kPaused;
      state_.trials.push_back(t);
      resumeNow_.push_back(id);
    }
    // The runs the last tuner had going (state.json is written as each run starts, so it knows
    // every run and its stop point): what they reported after the last state.json is read now
    // and decided on as it would have been; each then ends as if it had been stopped there.
    files_.rewriteResults(state_);
    std::vector<int> interrupted;
    for (Trial& t : state_.trials) {
      sawReport_ = sawReport_ || !t.results.empty();
      if (t.status != TrialStatus::kRunning) continue;
      // A run the scheduler had stopped (stopped_early) reports nothing more and ends as stopped.
      runs_[t.id] = RunInfo{t.runStart, std::nullopt, t.stoppedEarly};
      lastSeen_[t.id] = t.iteration();
      readReports(t.id);
      interrupted.push_back(t.id);
    }
    for (int id : interrupted) {
      RunEnd e;
      e.trial = id;
      e.interrupted = true;
      endRun(e);
    }
    view_.event(fmt::format("resuming {}: {} trials, {} to restart", files_.dir(), state_.trials.size(),
                            resumeNow_.size()));
  }

  int loop() {
    while (true) {
      if (const int sig = launcher::interruptSignal()) {
        executor_.stopAll();
        forgetRuns();
        save();
        view_.finish(state_, elapsed(), where());
        fmt::print(stderr,
                   "gyre tune: interrupted by signal {}; every run stopped. `gyre tune --resume {}` finishes "
                   "the experiment\n",
                   sig, files_.dir());
        return 128 + sig;
      }
      const std::vector<RunEnd> ended = executor_.wait(std::chrono::milliseconds(50));
      for (auto& [id, info] : runs_) {
        readReports(id);
        if (!failed_.empty()) return fail();
        if (info.stopAfter && info.stopAfter->expired()) {
          info.stopAfter.reset();
          executor_.stop(id, kStopGrace);
        }
      }
      for (const RunEnd& e : ended) endRun(e);
      fill();
      if (!failed_.empty()) return fail();
      if (runs_.empty()) break;
      maybeSave();
      view_.draw(state_, elapsed(), where());
    }
    // Nothing runs and nothing can start: trials still paused will not be resumed.
    for (Trial& t : state_.trials)
      if (t.status == TrialStatus::kPaused) {
        t.status = TrialStatus::kTerminated;
        t.stoppedEarly = t.iteration() < spec_.scheduler.maxT;
      }
    save();
    view_.finish(state_, elapsed(), where());
    return 0;
  }

  int fail() {
    executor_.stopAll();
    forgetRuns();
    save();
    fmt::print(stderr, "gyre tune: {}\n", failed_);
    return 1;
  }

  // The runs were stopped from outside the experiment (an interrupt, an error): their trials stay
  // RUNNING in state.json, so that --resume restarts them first.
  void forgetRuns() { runs_.clear(); }

  void readReports(int id) {
    Trial& t = trial(id);
    const RunPaths paths = runPaths(spec_, files_.trialDir(id));
    std::ifstream in(paths.reportFile, std::ios::binary);
    if (!in) return;
    // gyre train rewrites its metrics.jsonl (cut back to its checkpoint when it resumes): read it
    // again from the start when it is shorter than what was read; duplicates are skipped.
    std::uint64_t& offset = offsets_[id];
    std::error_code ec;
    if (fs::file_size(paths.reportFile, ec) < offset) offset = 0;
    in.seekg(static_cast<std::streamoff>(offset));
    std::string line;
    while (std::getline(in, line)) {
      if (in.eof()) break;  // no newline yet: the rest of it is still being written
      offset += line.size() + 1;
      std::optional<Result> r = parseReport(line, spec_.metric, lastSeen_[id]);
      if (!r) continue;
      lastSeen_[id] = r->iteration;
      auto run = runs_.find(id);
      if (run != runs_.end()) run->second.reached = std::max(run->second.reached, r->iteration);
      if (run != runs_.end() && run->second.scheduledStop) continue;  // stopped: nothing more counts
      if (r->iteration <= t.iteration() || t.status != TrialStatus::kRunning) continue;  // known already
      if (r->iteration > t.stopAt) continue;  // past its stop point: not this run's
      r->time = elapsed();
      accept(t, std::move(*r));
      if (!failed_.empty()) return;
    }
  }

  void accept(Trial& t, Result r) {
    if (!sawReport_) {
      sawReport_ = true;
      if (std::isnan(r.metric)) {
        std::string keys;
        for (const auto& [key, value] : r.metrics.items()) keys += (keys.empty() ? "" : ", ") + key;
        failed_ = fmt::format(
            "--metric {}: trial {}'s first report has no such number (it has: {}); stopping the experiment",
            spec_.metric, t.id, keys.empty() ? "nothing" : keys);
        return;
      }
    }
    t.results.push_back(std::move(r));
    const Result& last = t.results.back();
    // A command saves its checkpoint before it reports (gyre/tune.h); gyre train checkpoints at
    // the end of a run, and resumes from its newest checkpoint whatever this says.
    if (!spec_.builtin) t.checkpointAt = last.iteration;
    files_.appendResult(t, last);
    view_.event(
        fmt::format("trial {} iteration {}: {} {}", t.id, last.iteration, spec_.metric,
                    std::isnan(last.metric) ? std::string("missing") : fmt::format("{:.4f}", last.metric)));
    RunInfo& info = runs_.at(t.id);
    if (scheduler_->onResult(context(), t, last) == Verdict::kStop) {
      // Recorded now (state.json keeps stopped_early): a tuner that dies before the process ends
      // must not run it again.
      t.stoppedEarly = true;
      info.scheduledStop = true;
      executor_.stop(t.id, kStopGrace);
      return;
    }
    if (last.iteration >= t.stopAt && !info.stopAfter) info.stopAfter = Deadline::after(kReachedGrace);
  }

  void endRun(const RunEnd& e) {
    Trial& t = trial(e.trial);
    const RunInfo info = runs_.at(e.trial);
    runs_.erase(e.trial);
    t.busySeconds += e.seconds * t.np;
    t.workerIterations += std::max(0, info.reached - t.runStart) * t.np;
    if (info.scheduledStop) {
      t.status = TrialStatus::kTerminated;
      view_.event(fmt::format("trial {} stopped by the scheduler at iteration {}", t.id, t.iteration()));
      return;
    }
    const bool reached = t.iteration() >= t.stopAt;
    if (e.interrupted && !reached) {
      t.status = TrialStatus::kPaused;
      retryTo_[t.id] = t.stopAt;
      resumeNow_.push_back(t.id);
      return;
    }
    // A command saves its checkpoint before each report: one that reported its stop point did its
    // run's work, however it exited after. gyre train's checkpoint comes at its end: it runs again.
    if (reached && !e.ok() && !e.stopped && !e.interrupted && !spec_.builtin)
      view_.event(fmt::format("trial {}'s run {} after reporting iteration {}: taken as ended there", t.id,
                              e.describe(), t.iteration()));
    if (!(e.ok() || (reached && (e.stopped || e.interrupted || !spec_.builtin)))) {
      ++t.failures;
      const std::string why =
          fmt::format("run {} ({})", e.describe(), lastLine(runPaths(spec_, files_.trialDir(t.id)).logFile));
      if (t.failures <= spec_.maxFailures) {
        t.status = TrialStatus::kPaused;
        retryTo_[t.id] = t.stopAt;  // the same run again: the scheduler has not decided past it
        resumeNow_.push_back(t.id);
        view_.event(fmt::format("trial {} failed: {}; retrying from iteration {} ({} of {})", t.id, why,
                                t.checkpointAt, t.failures, spec_.maxFailures));
      } else {
        t.status = TrialStatus::kError;
        t.error = why;
        view_.event(fmt::format("trial {} ERROR after {} failure{}: {}", t.id, t.failures,
                                t.failures == 1 ? "" : "s", why));
      }
      return;
    }
    if (!reached) {  // it ended on its own before the stop point
      t.status = TrialStatus::kTerminated;
      view_.event(fmt::format("trial {} finished at iteration {}", t.id, t.iteration()));
      return;
    }
    t.checkpointAt = t.iteration();
    if (spec_.scheduler.name == "pbt") {
      const RunPaths paths = runPaths(spec_, files_.trialDir(t.id));
      linkCopy(paths.checkpointDir, fs::path(paths.trialDir) / "saved");
    }
    if (t.iteration() >= spec_.scheduler.maxT) {
      t.status = TrialStatus::kTerminated;
      view_.event(fmt::format("trial {} done: {} iterations", t.id, t.iteration()));
      return;
    }
    const Decision d = scheduler_->onRunEnd(context(), t);
    if (d.exploit) exploit(t, *d.exploit);
    switch (d.verdict) {
      case Verdict::kContinue:
        t.status = TrialStatus::kPaused;
        resumeNow_.push_front(t.id);
        break;
      case Verdict::kPause:
        t.status = TrialStatus::kPaused;
        break;
      case Verdict::kStop:
        t.status = TrialStatus::kTerminated;
        t.stoppedEarly = true;
        break;
    }
  }

  void exploit(Trial& t, const Exploit& e) {
    const Trial& source = trial(e.source);
    const RunPaths mine = runPaths(spec_, files_.trialDir(t.id));
    const fs::path saved = fs::path(files_.trialDir(source.id)) / "saved";
    std::error_code ec;
    if (!fs::is_directory(saved, ec)) {
      view_.event(fmt::format("trial {} cannot exploit trial {}: it saved no checkpoint ({})", t.id,
                              source.id, saved.string()));
      return;
    }
    linkCopy(saved, mine.checkpointDir);
    view_.event(fmt::format("trial {} exploits trial {} at iteration {}: {} -> {}", t.id, source.id,
                            e.iteration, describeConfig(spec_.space, t.config),
                            describeConfig(spec_.space, e.config)));
    t.config = e.config;
    t.checkpointAt = source.checkpointAt;
    t.lineage.push_back(e);
    writeTrialFile(t);
  }

  void fill() {
    while (executor_.freeSlots() >= spec_.np && failed_.empty()) {
      if (!resumeNow_.empty()) {
        const int id = resumeNow_.front();
        resumeNow_.pop_front();
        if (trial(id).status == TrialStatus::kPaused) start(trial(id));
        continue;
      }
      const Context c = context();
      const Plan plan = scheduler_->next(c);
      for (int id : plan.stop) {
        Trial& t = trial(id);
        if (t.status != TrialStatus::kPaused) continue;
        t.status = TrialStatus::kTerminated;
        t.stoppedEarly = true;
        view_.event(fmt::format("trial {} stopped by the scheduler at iteration {}", t.id, t.iteration()));
      }
      if (plan.newFirst && c.moreToCome) {
        create();
      } else if (plan.resume >= 0) {
        start(trial(plan.resume));
      } else if (plan.allowNew && c.moreToCome) {
        create();
      } else {
        break;
      }
    }
  }

  void writeTrialFile(const Trial& t) {
    std::ofstream out(fs::path(files_.trialDir(t.id)) / "trial.json");
    out << Json{{"id", t.id}, {"config", t.config}}.dump() << '\n';
  }

  void create() {
    const int id = static_cast<int>(state_.trials.size());
    Trial t;
    t.id = id;
    t.np = spec_.np;
    t.config = searcher_->suggest(id, state_.trials, spec_.sign());
    std::error_code ec;
    fs::remove_all(files_.trialDir(id), ec);  // a trial of a tuner killed before it saved
    fs::create_directories(files_.trialDir(id), ec);
    if (ec) throw SystemError("cannot create " + files_.trialDir(id) + ": " + ec.message());
    writeTrialFile(t);
    state_.trials.push_back(t);
    start(state_.trials.back());
  }

  void start(Trial& t) {
    const auto retry = retryTo_.find(t.id);
    t.stopAt = retry != retryTo_.end() && retry->second > t.checkpointAt ? retry->second
                                                                         : scheduler_->stopAt(context(), t);
    if (retry != retryTo_.end()) retryTo_.erase(retry);
    if (t.stopAt <= t.checkpointAt) {  // nothing left to train
      t.status = TrialStatus::kTerminated;
      view_.event(fmt::format("trial {} done: its checkpoint is at iteration {}", t.id, t.checkpointAt));
      return;
    }
    t.runStart = t.checkpointAt;
    const RunSpec run = runSpec(spec_, t, runPaths(spec_, files_.trialDir(t.id)), o_.gyre);
    try {
      t.node = executor_.start(run);
    } catch (const Error& e) {
      t.status = TrialStatus::kError;
      t.error = std::string("cannot start: ") + e.what();
      view_.event(fmt::format("trial {} ERROR: {}", t.id, t.error));
      return;
    }
    t.status = TrialStatus::kRunning;
    runs_[t.id] = RunInfo{t.checkpointAt, std::nullopt, false};
    lastSeen_[t.id] = t.iteration();
    offsets_[t.id] = 0;  // its reports from the start: those recorded already are skipped
    // Every run is in state.json before it can report, so that --resume knows it and its stop
    // point (a run started after the last save would be invisible).
    save(false);
    view_.event(fmt::format("trial {} {} ({}) to iteration {}", t.id,
                            t.checkpointAt > 0 ? "resumes" : "starts", describeConfig(spec_.space, t.config),
                            t.stopAt));
  }

  void maybeSave() {
    if (secondsSince(lastSave_) < o_.stateIntervalS) return;
    save();
  }

  void save(bool withTable = true) {
    files_.saveState(state_, elapsed(), spec_, withTable);
    lastSave_ = Clock::now();
  }

  void finishSummary(Summary* s) {
    Summary sum;
    const double sign = spec_.sign();
    sum.trials = static_cast<int>(state_.trials.size());
    sum.slots = executor_.capacity();
    sum.elapsedS = elapsed();
    for (const Trial& t : state_.trials) {
      sum.workerIterations += t.workerIterations;
      sum.busySlotSeconds += t.busySeconds;
      sum.terminated += t.status == TrialStatus::kTerminated;
      sum.errors += t.status == TrialStatus::kError;
      sum.stoppedEarly += t.stoppedEarly;
      for (const Result& r : t.results)
        if (!std::isnan(r.metric) && (sum.bestTrial < 0 || sign * r.metric > sign * sum.bestMetric)) {
          sum.bestTrial = t.id;
          sum.bestMetric = r.metric;
          sum.bestIteration = r.iteration;
          sum.bestConfig = t.config;
        }
    }
    if (sum.bestTrial >= 0) {
      sum.bestCheckpoint = runPaths(spec_, files_.trialDir(sum.bestTrial)).checkpointDir;
      fmt::print(o_.out, "best trial {}: {} {:.4f} at iteration {} ({})\n  checkpoint: {}\n", sum.bestTrial,
                 spec_.metric, sum.bestMetric, sum.bestIteration, describeConfig(spec_.space, sum.bestConfig),
                 sum.bestCheckpoint);
    } else {
      fmt::print(o_.out, "no trial reported {}\n", spec_.metric);
    }
    fmt::print(o_.out,
               "compute: {:.0f} worker-iterations, {:.1f} busy slot-seconds of {:.1f} ({} slots x {:.1f} s): "
               "slot utilisation {:.1f}%\n{} trials: {} terminated ({} stopped early), {} error\n",
               sum.workerIterations, sum.busySlotSeconds, sum.slots * sum.elapsedS, sum.slots, sum.elapsedS,
               100 * sum.utilisation(), sum.trials, sum.terminated, sum.stoppedEarly, sum.errors);
    fmt::print(o_.out, "results: {0}/results.jsonl, {0}/trials.csv\n", files_.dir());
    if (o_.json) fmt::print(o_.out, "{}\n", sum.toJson(spec_.metric).dump());
    std::fflush(o_.out);
    if (s != nullptr) *s = sum;
  }

  const ExperimentSpec& spec_;
  const ExperimentFiles& files_;
  Executor& executor_;
  const RunnerOptions& o_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<Searcher> searcher_;
  StatusView view_;
  ExperimentState state_;
  Clock::time_point started_;
  Clock::time_point lastSave_{};
  std::map<int, RunInfo> runs_;
  std::map<int, std::uint64_t> offsets_;
  std::map<int, int> lastSeen_;
  std::map<int, int> retryTo_;  // trial -> the stop point of the run that failed
  std::deque<int> resumeNow_;
  bool sawReport_ = false;
  std::string failed_;
};

}  // namespace

Json Summary::toJson(const std::string& metric) const {
  return {{"best_trial", bestTrial},
          {"best_" + metric, bestTrial >= 0 ? Json(bestMetric) : Json()},
          {"best_iteration", bestIteration},
          {"best_config", bestConfig},
          {"best_checkpoint", bestCheckpoint},
          {"trials", trials},
          {"terminated", terminated},
          {"errors", errors},
          {"stopped_early", stoppedEarly},
          {"worker_iterations", workerIterations},
          {"busy_slot_s", busySlotSeconds},
          {"elapsed_s", elapsedS},
          {"slots", slots},
          {"utilisation", utilisation()}};
}

int runExperiment(const ExperimentSpec& spec, const ExperimentFiles& files, Executor& executor,
                  const RunnerOptions& o, Summary* summary) {
  Loop loop(spec, files, executor, o);
  return loop.run(summary);
}

}  // namespace gyre::tune
