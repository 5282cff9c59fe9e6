// Where workers' output goes in `gyre run`: the launcher's stdout/stderr (tagged with the rank,
// as `[3]<stdout>:text`, or untagged), one log file per rank with --output-dir, and the last
// lines of every rank kept in memory for the failure report. An elastic job passes worker ids
// as ranks; the sink grows when a higher one first writes. Parameter servers' lines come tagged
// `[ps0]` (serverLine).
#pragma once

#include <cstdio>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace gyre::launcher {

// A line of the launcher's own, on its stderr: "gyre run: LINE".
void say(const std::string& line);

class OutputSink {
 public:
  // Creates outputDir (and its parents) when not empty, and the logs of ranks 0 .. worldSize - 1;
  // throws SystemError if it cannot.
  OutputSink(int worldSize, bool tag, const std::string& outputDir, std::size_t tailLines = 10);
  ~OutputSink();
  OutputSink(const OutputSink&) = delete;
  OutputSink& operator=(const OutputSink&) = delete;

  // One line of a rank's output; terminator '\n', '\r' or '\0' (a cut line: no terminator). A
  // rank beyond those so far gets its log now (a log that cannot be created is skipped, with a
  // message on stderr: the job goes on); a negative rank is ignored.
  void line(int rank, bool fromStderr, const std::string& text, char terminator);
  // One line of parameter server `index` (`gyre run --servers`): always tagged, as
  // `[ps1]<stderr>:text`, and written to DIR/ps.N.log with --output-dir.
  void serverLine(int index, bool fromStderr, const std::string& text, char terminator);
  // The rank's last lines, oldest first (none for a rank that never wrote).
  std::vector<std::string> tail(int rank) const;
  // The rank's log file, or "" without --output-dir.
  std::string logPath(int rank) const;
  // A restart (--max-restarts): every log gets a line "--- gyre run: restart N ---" (on a line of
  // its own after a cut line) and the tails start empty, so a failure report shows only the new
  // generation's lines.
  void startGeneration(int restart);
  void flush();

 private:
  std::FILE* openLog(int rank);
  std::FILE* serverLog(int index);  // opened at its first line; null without --output-dir
  void grow(int rank);

  bool tag_;
  std::string dir_;
  std::size_t tailLines_;
  std::vector<std::FILE*> logs_;  // one per rank with --output-dir (null: could not be created)
  std::vector<std::deque<std::string>> tails_;
  std::vector<std::string> partial_;    // a cut line being assembled for the tail
  std::vector<std::FILE*> serverLogs_;  // with --output-dir, by server index (null: not opened)
  bool serverLogFailed_ = false;        // one could not be created (warned once)
};

}  // namespace gyre::launcher
