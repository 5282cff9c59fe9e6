// What `gyre info` observes on this machine: external commands run under a time-out, the BLAS
// the dynamic loader resolves, libtorch's headers and libraries, the cores. The judgements made
// from these observations are in info_probe.h.
//
// Thread-safety: every function may be called from several threads at once (`gyre info` runs
// its `--version` commands in parallel).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "info/info_probe.h"
#include "launcher/command.h"

namespace gyre::info {

// ---- external commands ---------------------------------------------------------------------

// The launcher's bounded command runner (launcher/command.h), under the names `gyre info` uses.
using launcher::CommandOptions;
using launcher::CommandResult;
using launcher::runCommand;

// ---- shared libraries ----------------------------------------------------------------------

// The DT_NEEDED entries (sonames) of an ELF shared library or executable, in file order, read
// from the file without loading it. Empty when the file is missing or is not a 64-bit
// little-endian ELF file.
std::vector<std::string> elfNeeded(const std::string& path);

// The symlinks from `path` to the file it finally names, `path` first and the file last
// (one element when `path` is no symlink). At most 40 links are followed.
std::vector<std::string> symlinkChain(const std::string& path);

struct BlasProbe {
  std::string soname;                // what was asked of the loader: "libblas.so.3"
  std::string loadedPath;            // where the loader found it; "" when it did not
  std::vector<std::string> chain;    // symlinkChain(loadedPath)
  std::vector<std::string> markers;  // the kBlasMarkers it (or its dependencies) exports
  std::string config;                // openblas_get_config(), when OpenBLAS
  std::string loaderError;           // dlerror() when it was not found
  BlasVerdict verdict;               // classifyBlas(chain.back(), markers)
};

// Loads `soname` with dlopen the way a program linking it would (LD_LIBRARY_PATH, the loader
// cache, the alternatives' symlinks), looks for the marker symbols, and classifies it. The library
// stays loaded: OpenBLAS does not support being unloaded.
BlasProbe probeBlas(const std::string& soname);

// ---- libtorch ------------------------------------------------------------------------------

struct TorchProbe {
  std::string version;              // "" when no header was found
  std::string header;               // the torch/version.h read
  std::string library;              // libtorch_cpu.so, "" when not found
  std::vector<std::string> needed;  // its DT_NEEDED entries
};

// Finds libtorch from its headers and libraries (torchHeaderCandidates and
// torchLibraryCandidates, given CMAKE_PREFIX_PATH) without loading it.
TorchProbe probeTorch(const std::string& cmakePrefixPath);

// ---- the machine ---------------------------------------------------------------------------

// The library directory triple of this build, for Debian paths: "x86_64-linux-gnu".
std::string multiarchTriple();

struct Cores {
  int online = 0;  // sysconf(_SC_NPROCESSORS_ONLN)
  int usable = 0;  // CPUs in this process's affinity mask (sched_getaffinity)
};
Cores countCores();

}  // namespace gyre::info
