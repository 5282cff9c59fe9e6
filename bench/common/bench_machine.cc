#include "bench_machine.h"

#include <fmt/format.h>

#include <cstdlib>

#include "info/info_system.h"

namespace gyre::app {

BenchMachine thisMachine() {
  BenchMachine m;
  const info::Cores cores = info::countCores();
  m.usableCores = cores.usable;
  m.onlineCores = cores.online;
  if (double load[1]; getloadavg(load, 1) == 1) m.loadAverage = load[0];
  return m;
}

std::string busyWarning(const BenchMachine& m, const std::string& advice) {
  if (!(m.loadAverage > 0.5 * m.usableCores)) return "";
  return fmt::format(
      "warning: the machine is busy (load average {:.2f} on {} cores): the figures will be low and noisy{}\n",
      m.loadAverage, m.usableCores, advice);
}

}  // namespace gyre::app
