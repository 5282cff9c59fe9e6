#include "run_dir.h"

#include <ctime>

namespace gyre::app {

std::filesystem::path uniqueRunDir(const std::string& name) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  const std::filesystem::path base = std::filesystem::path("runs") / (name + "-" + stamp);
  std::filesystem::path dir = base;
  for (int n = 2; std::filesystem::exists(dir); ++n) dir = base.string() + "-" + std::to_string(n);
  return dir;
}

}  // namespace gyre::app
