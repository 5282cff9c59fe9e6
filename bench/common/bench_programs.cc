#include "bench_programs.h"

#include <filesystem>

#include "common/check.h"
#include "launcher/process.h"

namespace gyre::app {

std::string toolDirectory() {
  return std::filesystem::path(launcher::selfExecutable()).parent_path().string();
}

std::string besideTool(const std::string& name) {
  return (std::filesystem::path(toolDirectory()) / name).string();
}

std::string givenProgram(const std::string& flag, const std::string& path) {
  const std::string found =
      launcher::findExecutable(path.find('/') == std::string::npos ? "./" + path : path);
  GYRE_USAGE_CHECK(!found.empty(), flag, " ", path, " is not an executable file");
  return found;
}

}  // namespace gyre::app
