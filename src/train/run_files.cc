#include "train/run_files.h"

#include <filesystem>

#include "gyre/errors.h"

namespace gyre::train {

void createRunDirectory(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("cannot create the run directory " + dir + ": " + ec.message());
}

}  // namespace gyre::train
