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

#include "info_probe.h"

namespace gyre::app::info {

// ---- external commands ---------------------------------------------------------------------

struct CommandOptions {
  // The command, and every process it started in its process group, is killed (SIGKILL) when it
  // has not ended by then.
  std::chrono::milliseconds timeout{3000};
  // Output beyond this is read and dropped, so a chatty command can neither block nor bloat us.
  std::size_t maxOutputBytes = 64 * 1024;
  // Variables set (or replaced) in, and removed from, the inherited environment.
  std::vector<std::pair<std::string, std::string>> setEnv;
  std::vector<std::string> unsetEnv;
};

struct CommandResult {
  bool started = false;   // false: it could not be executed (see `error`)
  bool timedOut = false;  // killed at the time-out
  int exitCode = -1;      // its exit status, -1 when a signal ended it or it did not start
  int signal = 0;         // the signal that ended it
  std::string output;     // stdout and stderr, interleaved as written
  std::string error;      // why it did not start, or how it ended when not ok()
  bool ok() const { return started && !timedOut && exitCode == 0; }
};

// Runs argv (argv[0] searched in PATH) with stdin from /dev/null, capturing stdout and stderr,
// and returns when it has exited and its output is read, or at the time-out. Never blocks longer
// than about the time-out. The command leads a process group of its own, and whatever is left
// in that group when it returns is killed: nothing it started outlives the call. Throws
// InvalidArgument for an empty argv and SystemError when a pipe cannot be made.
CommandResult runCommand(const std::vector<std::string>& argv, const CommandOptions& options = {});

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

}  // namespace gyre::app::info
