#include "train/run_files.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "gyre/errors.h"
#include "torch/checkpoint_files.h"

namespace gyre::train {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int error) {
  throw Error("cannot " + what + " " + path + ": " + std::strerror(error) +
              (error == ENOSPC || error == EDQUOT ? " (the disk is full)" : ""));
}

}  // namespace

void createRunDirectory(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("cannot create the run directory " + dir + ": " + ec.message());
}

std::string temporaryPathFor(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid());
}

void writeFileAtomically(const std::string& path, const std::string& content) {
  const std::filesystem::path p(path);
  gyre::torch::detail::writeFileDurably(p.parent_path().string(), p.filename().string(), content);
}

void commitFile(const std::string& temporary, const std::string& path) {
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    fail("write", path + " (renaming " + temporary + ")", error);
  }
}

}  // namespace gyre::train
