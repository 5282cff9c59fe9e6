#include "support/processes.h"

#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "support/programs.h"

namespace gyre::test {

std::vector<std::string> processesWith(const std::string& marker) {
  std::vector<std::string> found;
  DIR* dir = opendir("/proc");
  while (const dirent* e = dir ? readdir(dir) : nullptr) {
    if (std::atoi(e->d_name) <= 0) continue;
    std::string cmd = readFile(std::string("/proc/") + e->d_name + "/cmdline");
    for (char& c : cmd)
      if (c == '\0') c = ' ';
    if (cmd.find(marker) != std::string::npos) found.push_back(std::string(e->d_name) + ": " + cmd);
  }
  if (dir) closedir(dir);
  return found;
}

std::string uniqueSleep() {
  static std::atomic<int> n{0};
  return "97" + std::to_string(++n) + "." + std::to_string(getpid());
}

}  // namespace gyre::test
