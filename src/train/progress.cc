#include "train/progress.h"

#include <unistd.h>

#include "gyre/errors.h"

namespace gyre::train {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kBarWidth = 20;
constexpr auto kRedrawInterval = std::chrono::milliseconds(100);

}  // namespace

bool progressEnabled(const std::string& mode) {
  if (mode == "on") return true;
  if (mode == "off") return false;
  if (mode == "auto") return ::isatty(STDERR_FILENO) == 1;
  throw InvalidArgument("--progress '" + mode + "': expected auto, on or off");
}

ProgressBar::ProgressBar(bool enabled, std::FILE* out) : enabled_(enabled), out_(out) {}

void ProgressBar::start(int epoch, int epochs, std::int64_t steps, std::int64_t samplesPerStep) {
  epoch_ = epoch;
  epochs_ = epochs;
  steps_ = steps;
  samplesPerStep_ = samplesPerStep;
  start_ = Clock::now();
  lastDraw_ = Clock::time_point{};
}

void ProgressBar::update(std::int64_t step, double loss) {
  if (!enabled_ || steps_ <= 0) return;
  const auto now = Clock::now();
  if (step < steps_ && now - lastDraw_ < kRedrawInterval) return;
  lastDraw_ = now;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const int filled = static_cast<int>(kBarWidth * step / steps_);
  char text[160];
  std::snprintf(text, sizeof text, "epoch %d/%d [%s%s] %lld/%lld loss %.3f %.0f samples/s", epoch_, epochs_,
                std::string(filled, '#').c_str(), std::string(kBarWidth - filled, '.').c_str(),
                static_cast<long long>(step), static_cast<long long>(steps_), loss,
                seconds > 0 ? static_cast<double>(step * samplesPerStep_) / seconds : 0.0);
  draw(text);
}

void ProgressBar::finish() {
  if (!enabled_ || width_ == 0) return;
  draw("");
  width_ = 0;
}

void ProgressBar::note(const std::string& line) {
  finish();
  lastDraw_ = {};  // redraw at the next update
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void ProgressBar::draw(const std::string& text) {
  // Spaces cover what is left of a longer earlier drawing.
  const std::size_t pad = width_ > text.size() ? width_ - text.size() : 0;
  std::fprintf(out_, "%s%s\r", text.c_str(), std::string(pad, ' ').c_str());
  std::fflush(out_);
  width_ = text.size();
}

}  // namespace gyre::train
