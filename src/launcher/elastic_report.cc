#include "launcher/elastic_report.h"

#include <cstdio>

namespace gyre::launcher {
namespace {

constexpr std::size_t kStoryLines = 20;

// The cause of a failed job, as job.cc reports it: its line, where its output is, what followed.
int reportCause(const std::vector<Failure>& fatal, const OutputSink& output) {
  const Failure& cause = fatal.front();
  if (cause.rank >= 0) {
    const std::string log = output.logPath(cause.rank);
    std::string line =
        cause.message + (log.empty() ? "; its last output lines follow" : "; its output is in " + log);
    if (fatal.size() > 1) line += " (" + std::to_string(fatal.size() - 1) + " other failure(s) after it)";
    say(line);
    if (log.empty())
      for (const std::string& l : output.tail(cause.rank))
        std::fprintf(stderr, "  [%d] %s\n", cause.rank, l.c_str());
  }
  // A launcher's reason (rank -1) was printed when it gave up.
  for (std::size_t i = 1; i < fatal.size(); ++i) say("  also: " + fatal[i].message);
  return cause.exitCode == 0 ? 1 : cause.exitCode;
}

}  // namespace

int reportElasticJob(const RunOptions& o, const ElasticOutcome& outcome, const ElasticEnding& ending,
                     const OutputSink& output) {
  int code = 0;
  std::string headline = outcome.headline;
  if (ending.interrupt != 0) {
    say("interrupted by " + signalName(ending.interrupt) + "; stopped every worker");
    code = 128 + ending.interrupt;
    headline = "stopped by " + signalName(ending.interrupt);
  } else if (ending.timedOut) {
    say("the job ran past --timeout " + formatSeconds(o.timeoutS) + " s; stopped it");
    code = 124;
    headline = "stopped at --timeout";
  } else if (!ending.launcherError.empty()) {
    say(ending.launcherError + "; stopped every worker");
    code = 1;
    headline = "the launcher failed";
  } else if (!outcome.fatal.empty()) {
    code = reportCause(outcome.fatal, output);
  } else if (!outcome.finished) {
    say("every worker ended, and none finished (exited 0)");
    code = 1;
    headline = "no worker finished";
  } else if (!outcome.tolerated.empty()) {
    say("every worker finished; the elastic job went on past " + std::to_string(outcome.tolerated.size()) +
        " failure(s) (" + std::to_string(outcome.epochs) + " membership(s), " +
        std::to_string(outcome.replacements) + " replacement(s) of --max-restarts " +
        std::to_string(o.maxRestarts) + ")");
  }
  if (code == 0 || outcome.story.empty()) return code;
  say(headline + "; what the elastic job went through:");
  const std::size_t skip = outcome.story.size() > kStoryLines ? outcome.story.size() - kStoryLines : 0;
  if (skip > 0) say("  (" + std::to_string(skip) + " earlier event(s) left out)");
  for (std::size_t i = skip; i < outcome.story.size(); ++i) say("  " + outcome.story[i]);
  return code;
}

}  // namespace gyre::launcher
