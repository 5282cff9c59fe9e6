// Monotonic time and deadlines.
#pragma once

#include <chrono>

namespace gyre {

using Clock = std::chrono::steady_clock;

// A point in time after which a blocking call gives up.
class Deadline {
 public:
  static Deadline after(std::chrono::milliseconds d) { return Deadline(Clock::now() + d); }
  static Deadline never() { return Deadline(Clock::time_point::max()); }
  explicit Deadline(Clock::time_point at) : at_(at) {}

  bool expired() const { return Clock::now() >= at_; }
  Clock::time_point at() const { return at_; }
  // Milliseconds left, clamped to [0, cap]; for poll(2) and friends.
  int remainingMs(int cap = 1 << 30) const {
    if (at_ == Clock::time_point::max()) return cap;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
    if (left < 0) return 0;
    return left > cap ? cap : static_cast<int>(left);
  }

 private:
  Clock::time_point at_;
};

inline double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

inline double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace gyre
