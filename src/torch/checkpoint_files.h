// The file side of checkpoints (checkpoint.h): CRC32C, durable atomic writes, the manifest and the
// ckpt-<step> directory names. No libtorch in here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gyre::torch::detail {

inline constexpr const char* kManifestName = "manifest.json";

// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), as iSCSI and ext4 use it:
// crc32c("123456789") == 0xE3069283. Pass the previous result as `crc` to continue a sum.
std::uint32_t crc32c(const void* data, std::size_t size, std::uint32_t crc = 0);

// "ckpt-000000000100" for step 100; parseCheckpointName is its inverse (nullopt for other names).
std::string checkpointName(std::int64_t step);
std::optional<std::int64_t> parseCheckpointName(const std::string& name);

// The manifest of a checkpoint: each file's name, size and CRC32C, as JSON text.
struct ManifestEntry {
  std::string name;
  std::uint64_t bytes = 0;
  std::uint32_t crc = 0;
};
std::string manifestJson(std::int64_t step, const std::vector<ManifestEntry>& files);

// "" when DIR's manifest parses and every file it lists has its size and checksum, else one line
// saying what is wrong. With `contents`, the verified files' bytes by name go there.
std::string verifyDirectory(const std::string& dir, std::map<std::string, std::string>* contents = nullptr);

// The whole file; throws SystemError naming it.
std::string readWholeFile(const std::string& path);

// Deletes a checkpoint directory, its manifest first (so a crash half-way leaves an incomplete
// checkpoint, never one that looks complete). Returns false (and leaves the rest) on a failure.
bool removeCheckpointDirectory(const std::string& dir);

}  // namespace gyre::torch::detail
