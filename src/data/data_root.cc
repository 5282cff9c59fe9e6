#include "data/data_root.h"

#include <filesystem>

#include "data/records.h"
#include "data/table.h"
#include "gyre/errors.h"

namespace gyre::data::detail {
namespace {

namespace fs = std::filesystem;

// PATH/NAME.csv, .jsonl or .ndjson, the first that is a file; empty when none is.
std::string tableFile(const fs::path& root, const std::string& name) {
  std::error_code ec;
  for (const char* ext : {".csv", ".jsonl", ".ndjson"})
    if (fs::is_regular_file(root / (name + ext), ec)) return (root / (name + ext)).string();
  return "";
}

}  // namespace

const char* kindName(DataKind kind) {
  switch (kind) {
    case DataKind::kImageFolders: return "image folders";
    case DataKind::kTables: return "tables";
    case DataKind::kRecords: return "record shards";
  }
  return "?";
}

DataRoot describeDataRoot(const std::string& path) {
  const fs::path root(path);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw Error("--data " + path + " is not a directory");
  if (fs::is_regular_file(root / kRecordManifestName, ec)) return {DataKind::kRecords, path, path};
  if (fs::is_directory(root / "train", ec)) {
    for (const char* split : {"test", "val"})
      if (fs::is_directory(root / split, ec)) return {DataKind::kImageFolders, (root / "train").string(), (root / split).string()};
  }
  if (const std::string train = tableFile(root, "train"); !train.empty()) {
    for (const char* split : {"test", "val"})
      if (const std::string test = tableFile(root, split); !test.empty()) return {DataKind::kTables, train, test};
  }
  throw Error("--data " + path + " holds none of the layouts gyre reads: image folders (" + path +
              "/train/CLASS/IMAGE.png and " + path + "/test/CLASS/...; val for test will do), tables (" + path +
              "/train.csv and " + path + "/test.csv, or .jsonl), or record shards (" + path +
              "/index.json, written by gyre data pack)");
}

}  // namespace gyre::data::detail
