#include "info/info_probe.h"

#include <algorithm>
#include <cctype>

namespace gyre::info {
namespace {

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool hasMarker(std::span<const std::string> markers, std::string_view marker) {
  return std::find(markers.begin(), markers.end(), marker) != markers.end();
}

// The directory part of a path ("/a/b/c.so" -> "/a/b").
std::string_view directoryOf(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
}

std::string_view fileNameOf(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// Splits a colon-separated list, dropping empty entries and trailing slashes.
std::vector<std::string> splitPrefixes(std::string_view list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    auto colon = list.find(':', start);
    if (colon == std::string_view::npos) colon = list.size();
    std::string_view item = list.substr(start, colon - start);
    while (item.size() > 1 && item.back() == '/') item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    start = colon + 1;
  }
  out.emplace_back("/usr/local");
  out.emplace_back("/usr");
  std::vector<std::string> unique;
  for (auto& p : out)
    if (std::find(unique.begin(), unique.end(), p) == unique.end()) unique.push_back(std::move(p));
  return unique;
}

// The value of `#define NAME <value>` in `text` (continuation lines already joined), or "".
std::string_view defineValue(std::string_view text, std::string_view name) {
  std::size_t start = 0;
  while (start < text.size()) {
    auto eol = text.find('\n', start);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = trim(text.substr(start, eol - start));
    start = eol + 1;
    if (!line.starts_with('#')) continue;
    line = trim(line.substr(1));
    if (!line.starts_with("define")) continue;
    line = line.substr(6);
    if (line.empty() || !std::isspace(static_cast<unsigned char>(line.front()))) continue;
    line = trim(line);
    if (!line.starts_with(name)) continue;
    line = line.substr(name.size());
    if (!line.empty() && !std::isspace(static_cast<unsigned char>(line.front()))) continue;  // a longer name
    return trim(line);
  }
  return {};
}

bool isDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

}  // namespace

BlasVerdict classifyBlas(std::string_view realPath, std::span<const std::string> markers) {
  const std::string path = lower(realPath);
  const std::string dir = lower(directoryOf(realPath));
  if (realPath.empty()) return {BlasKind::kNotFound, "not found", true};
  if (hasMarker(markers, kOpenBlasMarker)) return {BlasKind::kOpenBlas, "OpenBLAS", false};
  if (hasMarker(markers, kMklMarker)) return {BlasKind::kMkl, "Intel MKL", false};
  if (hasMarker(markers, kBlisMarker)) return {BlasKind::kBlis, "BLIS", false};
  if (hasMarker(markers, kAtlasMarker)) return {BlasKind::kAtlas, "ATLAS", false};
  // No marker symbol: the path is all there is to go on.
  if (dir.ends_with("/blas") || contains(path, "netlib") || contains(path, "refblas"))
    return {BlasKind::kReference, "reference BLAS (netlib)", true};
  if (contains(path, "openblas")) return {BlasKind::kOpenBlas, "OpenBLAS", false};
  if (contains(path, "mkl")) return {BlasKind::kMkl, "Intel MKL", false};
  if (contains(path, "blis")) return {BlasKind::kBlis, "BLIS", false};
  if (contains(path, "atlas")) return {BlasKind::kAtlas, "ATLAS", false};
  return {BlasKind::kUnknown, "unrecognised BLAS (no OpenBLAS, MKL, BLIS or ATLAS symbols)", false};
}

std::string blasSoname(std::span<const std::string> needed) {
  for (const std::string& lib : needed) {
    const std::string name = lower(lib);
    if (contains(name, "lapack")) continue;
    if (contains(name, "blas") || name.starts_with("libmkl_rt") || name.starts_with("libblis")) return lib;
  }
  return "libblas.so.3";
}

std::vector<std::string> linearAlgebraLibraries(std::span<const std::string> needed) {
  std::vector<std::string> out;
  for (const std::string& lib : needed) {
    const std::string name = lower(lib);
    if (contains(name, "blas") || contains(name, "lapack") || name.starts_with("libmkl") ||
        name.starts_with("libblis"))
      out.push_back(lib);
  }
  return out;
}

std::string blasWarning(const BlasVerdict& verdict, std::string_view soname,
                        std::span<const std::string> chain, std::string_view multiarch) {
  if (!verdict.slow) return "";
  const std::string rule = "WARNING: " + std::string(78, '=') + "\n";
  std::string out = rule;
  auto line = [&](std::string_view text) {
    out += "WARNING: ";
    out += text;
    out += "\n";
  };
  const std::string name(soname);
  const std::string arch(multiarch);
  if (verdict.kind == BlasKind::kNotFound) {
    line("the dynamic loader finds no " + name + ": programs that link libtorch will not start.");
    line("Install an optimised BLAS that provides it, on Debian and Ubuntu:");
    line("    sudo apt-get install libopenblas0-pthread");
  } else {
    line(name + " is the REFERENCE BLAS (netlib), the unoptimised one.");
    line("libtorch's matrix products run on it, and training is about 35x SLOWER than with");
    line("OpenBLAS: measured speed-ups and throughputs mean nothing. To fix it, on Debian/Ubuntu:");
    line("    sudo apt-get install libopenblas0-pthread");
    const bool viaAlternatives =
        chain.empty() || std::any_of(chain.begin(), chain.end(), [](const std::string& link) {
          return link.starts_with("/etc/alternatives/");
        });
    if (!viaAlternatives) {
      line("This copy is not Debian's alternatives' choice: the loader found it at");
      line("    " + chain.front());
      line("so look at LD_LIBRARY_PATH (and /etc/ld.so.conf.d) for the directory that puts it first.");
    } else if (fileNameOf(name).starts_with("libblas.so")) {
      line("or, when OpenBLAS is installed but not selected:");
      line("    sudo update-alternatives --config libblas.so.3-" + arch);
      line("    sudo update-alternatives --config liblapack.so.3-" + arch);
    }
    line("then check again with `gyre info`.");
  }
  out += rule;
  return out;
}

std::optional<std::string> parseTorchVersionHeader(std::string_view text) {
  // Join continuation lines: "#define TORCH_VERSION \\\n  \"1.13.0\"".
  std::string joined;
  joined.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\') {
      std::size_t j = i + 1;
      if (j < text.size() && text[j] == '\r') ++j;
      if (j < text.size() && text[j] == '\n') {
        joined.push_back(' ');
        i = j;
        continue;
      }
    }
    joined.push_back(text[i]);
  }
  const std::string_view value = defineValue(joined, "TORCH_VERSION");
  if (value.size() >= 3 && value.front() == '"') {
    const auto close = value.find('"', 1);
    if (close != std::string_view::npos && close > 1) return std::string(value.substr(1, close - 1));
  }
  const std::string_view major = defineValue(joined, "TORCH_VERSION_MAJOR");
  const std::string_view minor = defineValue(joined, "TORCH_VERSION_MINOR");
  const std::string_view patch = defineValue(joined, "TORCH_VERSION_PATCH");
  if (isDigits(major) && isDigits(minor) && isDigits(patch))
    return std::string(major) + "." + std::string(minor) + "." + std::string(patch);
  return std::nullopt;
}

std::vector<std::string> torchHeaderCandidates(std::string_view cmakePrefixPath) {
  std::vector<std::string> out;
  for (const std::string& prefix : splitPrefixes(cmakePrefixPath)) {
    const std::string include = prefix == "/" ? "/include" : prefix + "/include";
    out.push_back(include + "/torch/csrc/api/include/torch/version.h");
  }
  return out;
}

std::vector<std::string> torchLibraryCandidates(std::string_view cmakePrefixPath,
                                                std::string_view multiarch) {
  std::vector<std::string> out;
  for (const std::string& prefix : splitPrefixes(cmakePrefixPath)) {
    const std::string lib = prefix == "/" ? "/lib" : prefix + "/lib";
    if (!multiarch.empty()) out.push_back(lib + "/" + std::string(multiarch) + "/libtorch_cpu.so");
    out.push_back(lib + "/libtorch_cpu.so");
  }
  return out;
}

std::string versionLine(std::string_view output) {
  std::size_t start = 0;
  while (start < output.size()) {
    auto eol = output.find('\n', start);
    if (eol == std::string_view::npos) eol = output.size();
    const std::string_view line = trim(output.substr(start, eol - start));
    if (!line.empty()) return std::string(line.substr(0, 120));
    start = eol + 1;
  }
  return "";
}

}  // namespace gyre::info
