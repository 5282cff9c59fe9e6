// How a generation of a `gyre run` job ended, which of its failures is named as the cause,
// whether another generation may be started (--max-restarts), and the lines the launcher prints
// about it. Pure functions of what the generation reported; see docs/gyre-run.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gyre::launcher {

struct Failure {
  int rank = -1;        // -1: not a worker (an agent, the launcher)
  std::string message;  // "rank 1 on host node2 exited with code 3 after 1.2 s"
  int exitCode = 1;     // what gyre run exits with when this failure ends the job
  bool bySignal = false;
  // A new generation may get past it: a worker failed, or a host's agent was lost after its
  // workers had started. Not: a program that cannot be found, a store that no agent reaches, a
  // worker that never started; those would fail the same way again.
  bool restartable = false;
};

// How a worker ended (agent_pool.h's endOf reads it from the agent's exit event).
struct WorkerEnd {
  bool ok = false;   // exited 0
  std::string what;  // "was killed by SIGKILL (Killed) after 3.2 s"
  int exitCode = 1;  // what gyre run exits with if this ends the job: the code, or 128 + the signal
  bool bySignal = false;
};

// How one generation ended. Failures come in the order they arrived; none when the generation
// succeeded or was stopped by an interrupt or --timeout before anything failed.
struct GenerationOutcome {
  std::vector<Failure> failures;
  // Ranks that ended other than by SIGKILL, by themselves or on the launcher's stop (SIGTERM):
  // they were alive and answering. A stopped (SIGSTOP) or hung worker ends only by SIGKILL.
  std::vector<int> answered;
  int interrupt = 0;  // SIGINT, SIGTERM or SIGHUP that stopped it
  bool timedOut = false;
  std::uint16_t storePort = 0;  // the generation's store (the next generations use others)
  bool succeeded() const { return failures.empty() && interrupt == 0 && !timedOut; }
};

// The failure named as the generation's cause: a worker killed by a signal usually caused the
// rest; then a worker; then the first. `failures` must not be empty.
const Failure& causeOf(const std::vector<Failure>& failures);

// The ranks that stopped answering: those that failed workers' last output lines say they timed
// out waiting for ("timed out waiting for rank 2 (...) to receive ...; rank 1 (...) to send ...")
// and that did not fail themselves: stopped (SIGSTOP), hung in their own code or far slower than
// the others. The failures are then only their victims. `tails` holds each failed worker's last
// lines, by rank. A rank in `answered` (GenerationOutcome::answered: it ended by itself or on the
// launcher's stop, so it was only waiting, like the failed ones) is not named. Empty: none.
std::vector<int> unansweringRanks(const std::map<int, std::vector<std::string>>& tails,
                                  const std::vector<Failure>& failures, const std::vector<int>& answered = {});

// Whether to start generation `restartsDone + 1`: the generation failed, neither an interrupt
// nor --timeout stopped it, its cause is restartable and restarts are left.
bool shouldRestart(const GenerationOutcome& outcome, int restartsDone, int maxRestarts);

// The one line printed when a failed generation is replaced (without "gyre run: "):
// "rank 1 on host h was killed by SIGKILL (Killed) after 3.2 s; restarting all 4 workers (restart 1 of 3)".
std::string restartLine(const GenerationOutcome& outcome, int worldSize, int restart, int maxRestarts);

// "generation 1: rank 1 on host h exited with code 3 after 0.4 s (1 other failure(s) after it)",
// "generation 2: stopped by SIGINT (Interrupt)", "generation 0: every worker succeeded".
std::string generationSummary(int generation, const GenerationOutcome& outcome);

// The story printed when a job that was restarted at least once ends without success: a header
// and one summary per generation (without "gyre run: "). Empty when `outcomes` holds one
// generation: then the final failure's own lines say everything, as without --max-restarts.
std::vector<std::string> storyLines(const std::vector<GenerationOutcome>& outcomes, int maxRestarts);

// Message helpers shared by the launcher: "3.2" (one decimal below 10 s), "SIGKILL (Killed)",
// "0, 2, 3".
std::string formatSeconds(double s);
std::string signalName(int sig);
std::string rankList(const std::vector<int>& ranks);

}  // namespace gyre::launcher
