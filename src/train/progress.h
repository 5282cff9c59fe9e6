// The live progress bar of an epoch, drawn in place on one line of stderr:
//
//   epoch 1/3 [#####.....] 312/468 loss 0.512 1843 samples/s
//
// Each drawing ends with '\r' (not begins), so `gyre run`, which relays a worker's output by
// lines cut at '\n' and '\r', shows it at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace gyre::train {

// "on", "off", or "auto": on when stderr is a terminal. Throws InvalidArgument otherwise.
bool progressEnabled(const std::string& mode);

// Not thread-safe: the training thread drives it.
class ProgressBar {
 public:
  // A disabled bar draws nothing.
  explicit ProgressBar(bool enabled, std::FILE* out = stderr);

  // A new epoch of `steps` steps of `samplesPerStep` samples (the global batch).
  void start(int epoch, int epochs, std::int64_t steps, std::int64_t samplesPerStep);
  // `step` steps done, `loss` their mean loss. Redraws at most ten times a second, and always
  // for the last step.
  void update(std::int64_t step, double loss);
  // Erases the bar, so the epoch's summary line starts on a clean line.
  void finish();
  // Prints a line of news on stdout (the bar, erased first, comes back at the next update).
  // Prints it whether the bar is enabled or not.
  void note(const std::string& line);

 private:
  void draw(const std::string& text);

  bool enabled_;
  std::FILE* out_;
  int epoch_ = 0;
  int epochs_ = 0;
  std::int64_t steps_ = 0;
  std::int64_t samplesPerStep_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point lastDraw_;
  std::size_t width_ = 0;  // of the text on the line now
};

}  // namespace gyre::train
