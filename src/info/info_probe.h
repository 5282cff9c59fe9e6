// The judgements behind `gyre info`, as pure functions of what was observed on the machine
// (paths, exported symbols, file contents, command output), so that tests can feed them any
// machine's evidence. The probing itself is in info_system.h.
//
// Thread-safety: every function here is pure.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gyre::info {

// ---- BLAS ----------------------------------------------------------------------------------

enum class BlasKind : std::uint8_t {
  kNotFound,   // the loader found no such library: libtorch cannot even start
  kReference,  // netlib's reference BLAS: correct, but training runs about 35x slower
  kOpenBlas,
  kMkl,
  kBlis,
  kAtlas,
  kUnknown,  // found, but none of the above marks it
};

// Symbols whose presence names a BLAS implementation (dlsym on the library searches its
// dependencies too). The reference BLAS exports none of them.
inline constexpr std::string_view kOpenBlasMarker = "openblas_get_config";
inline constexpr std::string_view kMklMarker = "MKL_Get_Version_String";
inline constexpr std::string_view kBlisMarker = "bli_info_get_version_str";
inline constexpr std::string_view kAtlasMarker = "ATL_buildinfo";
inline constexpr std::string_view kBlasMarkers[] = {kOpenBlasMarker, kMklMarker, kBlisMarker, kAtlasMarker};

struct BlasVerdict {
  BlasKind kind = BlasKind::kUnknown;
  std::string name;   // "OpenBLAS", "reference BLAS (netlib)", ...
  bool slow = false;  // true when training with it is an order of magnitude slower
};

// Classifies the library the loader resolved. `realPath` is the file after every symlink ("" when
// it was not found); `markers` are the names from kBlasMarkers it exports. Symbols win over
// paths; a library without markers is the reference BLAS when it lives where Debian installs
// netlib's (`.../blas/libblas.so.3`) or its path says "netlib"/"refblas".
BlasVerdict classifyBlas(std::string_view realPath, std::span<const std::string> markers);

// The BLAS library libtorch loads, given the DT_NEEDED entries of libtorch_cpu.so: the first entry
// that names a BLAS (libblas, libopenblas, libmkl_rt, libblis, ...). Without one (or without
// libtorch) the answer is "libblas.so.3", the name Debian's alternatives manage.
std::string blasSoname(std::span<const std::string> needed);

// The entries of `needed` that are BLAS or LAPACK libraries, for display.
std::vector<std::string> linearAlgebraLibraries(std::span<const std::string> needed);

// The multi-line warning `gyre info` prints for a slow or missing BLAS, with the commands that fix
// it on Debian (`multiarch` is the library triple, e.g. "x86_64-linux-gnu"). `chain` is the
// library's symlink chain: update-alternatives is suggested when it passes through
// /etc/alternatives (or is unknown), and LD_LIBRARY_PATH is blamed when it does not. Empty when
// the verdict needs no warning.
std::string blasWarning(const BlasVerdict& verdict, std::string_view soname,
                        std::span<const std::string> chain, std::string_view multiarch);

// ---- libtorch ------------------------------------------------------------------------------

// The version in the text of libtorch's torch/version.h: the TORCH_VERSION string (which may sit
// on a continuation line), else TORCH_VERSION_MAJOR.MINOR.PATCH; nullopt when neither is there.
std::optional<std::string> parseTorchVersionHeader(std::string_view text);

// Where to look for torch/version.h: under each prefix of `cmakePrefixPath` (colon-separated, as
// in the CMAKE_PREFIX_PATH variable; a downloaded libtorch is usually listed there), then under
// /usr/local and /usr.
std::vector<std::string> torchHeaderCandidates(std::string_view cmakePrefixPath);
// Where to look for libtorch_cpu.so: lib/<multiarch>/ and lib/ of the same prefixes.
std::vector<std::string> torchLibraryCandidates(std::string_view cmakePrefixPath, std::string_view multiarch);

// ---- launchers -----------------------------------------------------------------------------

// The first non-blank line of a `--version` output, trimmed and cut to at most 120 characters.
std::string versionLine(std::string_view output);

}  // namespace gyre::info
