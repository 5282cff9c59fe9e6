#include "launcher/failures.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/check.h"

namespace gyre::launcher {
namespace {

std::string plural(int n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

std::string othersNote(const std::vector<Failure>& failures) {
  const std::size_t others = failures.size() - 1;
  return others == 0 ? "" : " (" + std::to_string(others) + " other failure(s) after it)";
}

}  // namespace

const Failure& causeOf(const std::vector<Failure>& failures) {
  GYRE_ENFORCE(!failures.empty(), "causeOf() of no failures");
  auto it = std::find_if(failures.begin(), failures.end(), [](const Failure& f) { return f.bySignal; });
  if (it == failures.end())
    it = std::find_if(failures.begin(), failures.end(), [](const Failure& f) { return f.rank >= 0; });
  return it == failures.end() ? failures.front() : *it;
}

std::vector<int> unansweringRanks(const std::map<int, std::vector<std::string>>& tails,
                                  const std::vector<Failure>& failures, const std::vector<int>& answered) {
  static constexpr char kTimedOut[] = "timed out waiting for";
  static constexpr char kRank[] = "rank ";
  std::vector<int> out;
  for (const auto& [rank, lines] : tails) {
    for (const std::string& line : lines) {
      auto at = line.find(kTimedOut);
      if (at == std::string::npos) continue;
      // Every "rank N (" after it: the peers it was still waiting on.
      for (at = line.find(kRank, at); at != std::string::npos; at = line.find(kRank, at + 1)) {
        const char* digits = line.c_str() + at + sizeof(kRank) - 1;
        char* end = nullptr;
        const long peer = std::strtol(digits, &end, 10);
        if (end == digits || *end != ' ' || end[1] != '(' || peer < 0 || peer == rank) continue;
        const bool failed = std::any_of(failures.begin(), failures.end(), [&](const Failure& f) { return f.rank == peer; });
        const bool ended = std::find(answered.begin(), answered.end(), peer) != answered.end();
        if (!failed && !ended && std::find(out.begin(), out.end(), peer) == out.end())
          out.push_back(static_cast<int>(peer));
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool shouldRestart(const GenerationOutcome& outcome, int restartsDone, int maxRestarts) {
  if (outcome.failures.empty() || outcome.interrupt != 0 || outcome.timedOut) return false;
  return restartsDone < maxRestarts && causeOf(outcome.failures).restartable;
}

std::string restartLine(const GenerationOutcome& outcome, int worldSize, int restart, int maxRestarts) {
  return causeOf(outcome.failures).message + othersNote(outcome.failures) + "; restarting all " +
         plural(worldSize, "worker") + " (restart " + std::to_string(restart) + " of " +
         std::to_string(maxRestarts) + ")";
}

std::string generationSummary(int generation, const GenerationOutcome& outcome) {
  std::string line = "generation " + std::to_string(generation) + ": ";
  if (!outcome.failures.empty()) {
    line += causeOf(outcome.failures).message + othersNote(outcome.failures);
    if (outcome.interrupt != 0) line += "; then stopped by " + signalName(outcome.interrupt);
    if (outcome.timedOut) line += "; then stopped at --timeout";
    return line;
  }
  if (outcome.interrupt != 0) return line + "stopped by " + signalName(outcome.interrupt);
  if (outcome.timedOut) return line + "stopped at --timeout";
  return line + "every worker succeeded";
}

std::vector<std::string> storyLines(const std::vector<GenerationOutcome>& outcomes, int maxRestarts) {
  if (outcomes.size() < 2) return {};
  const GenerationOutcome& last = outcomes.back();
  const int restarts = static_cast<int>(outcomes.size()) - 1;
  std::string header;
  if (last.interrupt != 0 || last.timedOut || last.failures.empty()) {
    header = "stopped in generation " + std::to_string(restarts) + ", after " + plural(restarts, "restart");
  } else if (!causeOf(last.failures).restartable) {
    header = "not restarting: generation " + std::to_string(restarts) +
             " failed in a way a restart cannot get past (" + plural(restarts, "restart") + " of " +
             std::to_string(maxRestarts) + " used)";
  } else {
    header = "giving up after " + plural(restarts, "restart") + " (--max-restarts " +
             std::to_string(maxRestarts) + ")";
  }
  std::vector<std::string> lines{header + "; what each generation did:"};
  for (std::size_t g = 0; g < outcomes.size(); ++g)
    lines.push_back("  " + generationSummary(static_cast<int>(g), outcomes[g]));
  return lines;
}

std::string formatSeconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, s < 10 ? "%.1f" : "%.0f", s);
  return text;
}

std::string signalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* text = strsignal(sig);
  return (abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig)) +
         (text ? std::string(" (") + text + ")" : "");
}

std::string rankList(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace gyre::launcher
