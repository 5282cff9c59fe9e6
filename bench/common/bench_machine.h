// The machine a bench runs on, as it was at the start: its cores and how busy it was. The benches
// print it with their figures, since other busy processes lower every one of them, and warn when
// the machine is busy (gyre bench train and ps).
#pragma once

#include <string>

namespace gyre::app {

struct BenchMachine {
  int usableCores = 0;  // this process's CPUs
  int onlineCores = 0;
  double loadAverage = -1;  // 1-minute, at the start; < 0: unknown
};

// This machine now (info::countCores, getloadavg).
BenchMachine thisMachine();

// "warning: the machine is busy (load average 1.50 on 2 cores): the figures will be low and
// noisy" + `advice` + a newline when the load average exceeds half the usable cores; "" otherwise.
std::string busyWarning(const BenchMachine& m, const std::string& advice = "");

}  // namespace gyre::app
