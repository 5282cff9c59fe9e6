#include "torch/checkpoint_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "gyre/errors.h"

namespace gyre::torch::detail {
namespace {

namespace fs = std::filesystem;

// Slicing-by-8 tables: kTables[0] is the byte-wise table, kTables[k][b] the CRC of byte b
// followed by k zero bytes.
using CrcTables = std::array<std::array<std::uint32_t, 256>, 8>;

constexpr CrcTables makeTables() {
  CrcTables t{};
  for (std::uint32_t b = 0; b < 256; ++b) {
    std::uint32_t c = b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    t[0][b] = c;
  }
  for (std::size_t k = 1; k < 8; ++k)
    for (std::size_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
  return t;
}

constexpr CrcTables kTables = makeTables();

using files::fail;

std::string hex(std::uint32_t crc) {
  char text[9];
  std::snprintf(text, sizeof text, "%08" PRIx32, crc);
  return text;
}

}  // namespace

std::uint32_t crc32c(const void* data, std::size_t size, std::uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (; size >= 8; size -= 8, p += 8) {
    const std::uint32_t low = crc ^ (std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 |
                                     std::uint32_t{p[2]} << 16 | std::uint32_t{p[3]} << 24);
    crc = kTables[7][low & 0xFF] ^ kTables[6][(low >> 8) & 0xFF] ^ kTables[5][(low >> 16) & 0xFF] ^
          kTables[4][low >> 24] ^ kTables[3][p[4]] ^ kTables[2][p[5]] ^ kTables[1][p[6]] ^ kTables[0][p[7]];
  }
  for (; size > 0; --size, ++p) crc = (crc >> 8) ^ kTables[0][(crc ^ *p) & 0xFF];
  return ~crc;
}

std::string checkpointName(std::int64_t step) {
  char text[40];
  std::snprintf(text, sizeof text, "ckpt-%012lld", static_cast<long long>(step));
  return text;
}

std::optional<std::int64_t> parseCheckpointName(const std::string& name) {
  constexpr std::string_view kPrefix = "ckpt-";
  if (name.size() <= kPrefix.size() || name.compare(0, kPrefix.size(), kPrefix) != 0) return std::nullopt;
  std::int64_t step = 0;
  for (std::size_t i = kPrefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || step > (INT64_MAX - 9) / 10) return std::nullopt;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

std::string manifestJson(std::int64_t step, const std::vector<ManifestEntry>& files) {
  nlohmann::ordered_json j;
  j["format"] = "gyre-checkpoint";
  j["version"] = 1;
  j["step"] = step;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ManifestEntry& f : files)
    list.push_back({{"name", f.name}, {"bytes", f.bytes}, {"crc32c", hex(f.crc)}});
  j["files"] = std::move(list);
  return j.dump(2) + "\n";
}

std::string readWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("read", path, errno);
  std::string out;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      fail("read", path, error);
    }
    if (n == 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

std::string verifyDirectory(const std::string& dir, std::map<std::string, std::string>* contents) {
  const std::string manifestPath = dir + "/" + kManifestName;
  std::error_code ec;
  if (!fs::exists(manifestPath, ec))
    return std::string(kManifestName) + " missing: the checkpoint is incomplete";
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(readWholeFile(manifestPath));
    if (manifest.at("format") != "gyre-checkpoint")
      return std::string(kManifestName) + ": not a gyre checkpoint";
    if (manifest.at("version") != 1)
      return std::string(kManifestName) + ": format version " + manifest.at("version").dump() + " is not 1";
    if (!manifest.at("files").is_array() || manifest.at("files").empty())
      return std::string(kManifestName) + ": lists no files";
  } catch (const SystemError& e) {
    return e.what();
  } catch (const nlohmann::json::exception& e) {
    return std::string(kManifestName) + ": corrupted (" + e.what() + ")";
  }
  for (const nlohmann::json& f : manifest["files"]) {
    std::string name;
    std::uint64_t bytes = 0;
    std::string crc;
    try {
      name = f.at("name").get<std::string>();
      bytes = f.at("bytes").get<std::uint64_t>();
      crc = f.at("crc32c").get<std::string>();
    } catch (const nlohmann::json::exception& e) {
      return std::string(kManifestName) + ": corrupted entry (" + e.what() + ")";
    }
    if (name.empty() || name.find('/') != std::string::npos || name == kManifestName)
      return std::string(kManifestName) + ": corrupted entry (file name '" + name + "')";
    const std::string path = dir + "/" + name;
    if (!fs::exists(path, ec)) return name + " missing";
    std::string content;
    try {
      content = readWholeFile(path);
    } catch (const SystemError& e) {
      return e.what();
    }
    if (content.size() < bytes)
      return name + ": truncated (" + std::to_string(content.size()) + " of " + std::to_string(bytes) +
             " bytes)";
    if (content.size() > bytes)
      return name + ": " + std::to_string(content.size()) + " bytes, the manifest says " +
             std::to_string(bytes);
    const std::string actual = hex(crc32c(content.data(), content.size()));
    if (actual != crc) return name + ": corrupted (CRC32C " + actual + ", the manifest says " + crc + ")";
    if (contents != nullptr) (*contents)[name] = std::move(content);
  }
  return "";
}

bool removeCheckpointDirectory(const std::string& dir) {
  std::error_code ec;
  fs::remove(fs::path(dir) / kManifestName, ec);
  if (ec) return false;
  fs::remove_all(dir, ec);
  return !ec;
}

}  // namespace gyre::torch::detail
