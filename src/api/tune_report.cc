// gyre::tune::report and friends (include/gyre/tune.h): the trial side of gyre tune's reports.
// One JSON object per line, appended with one write(2) on an O_APPEND descriptor, so a line is
// never torn by another writer and the tuner reads only whole lines.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "common/config.h"
#include "common/json_string.h"
#include "common/numbers.h"
#include "gyre/errors.h"
#include "gyre/init.h"
#include "gyre/tune.h"

namespace gyre::tune {
namespace {

config::Env environment() {
  return config::processEnvironment();
}

std::mutex reportMutex;
int reported = -1;  // the last iteration this process reported; -1: none yet

}  // namespace

bool inTrial() {
  return config::isSet(environment(), "GYRE_TUNE_REPORT_FILE");
}

int startIteration() {
  return static_cast<int>(config::getOptionalInt(environment(), "GYRE_TUNE_START_ITERATION").value_or(0));
}

int stopAt() {
  return static_cast<int>(config::getOptionalInt(environment(), "GYRE_TUNE_STOP_AT").value_or(0));
}

std::string checkpointDir() {
  return config::getString(environment(), "GYRE_TUNE_CHECKPOINT_DIR");
}

std::string trialDir() {
  return config::getString(environment(), "GYRE_TUNE_TRIAL_DIR");
}

int trialId() {
  return static_cast<int>(config::getOptionalInt(environment(), "GYRE_TUNE_TRIAL_ID").value_or(-1));
}

int report(const std::map<std::string, double>& metrics) {
  return report(metrics, 0);
}

int report(const std::map<std::string, double>& metrics, int given) {
  const config::Env env = environment();
  const std::string path = config::getString(env, "GYRE_TUNE_REPORT_FILE");
  if (path.empty() || config::getOptionalInt(env, "GYRE_RANK").value_or(0) != 0) return 0;
  std::lock_guard<std::mutex> lock(reportMutex);
  if (reported < 0)
    reported = static_cast<int>(config::getOptionalInt(env, "GYRE_TUNE_START_ITERATION").value_or(0));
  const int iteration = given > 0 ? given : reported + 1;
  std::string line = "{\"iteration\":" + std::to_string(iteration);
  for (const auto& [name, value] : metrics) {
    if (name == "iteration" || name.empty())
      throw InvalidArgument("gyre::tune::report: \"" + name +
                            "\" cannot name a metric (the iteration is numbered for you)");
    line += ',';
    line += jsonString(name);
    line += ':';
    line += std::isfinite(value) ? numbers::format(value) : std::string("null");
  }
  line += "}\n";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw SystemError("gyre::tune::report: cannot open " + path + ": " + std::strerror(errno));
  const ssize_t n = ::write(fd, line.data(), line.size());
  const int error = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(line.size()))
    throw SystemError("gyre::tune::report: cannot append to " + path + ": " +
                      (n < 0 ? std::strerror(error) : "short write (is the disk full?)"));
  reported = iteration;
  return iteration;
}

}  // namespace gyre::tune
