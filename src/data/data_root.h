// What a data set's folder holds (`gyre train --data PATH`, `gyre data pack SRC`), libtorch-free:
//   - image folders: PATH/train/CLASS/*.png|*.jpg and PATH/test/... (or PATH/val/...);
//   - tables: PATH/train.csv and PATH/test.csv (or val; or .jsonl / .ndjson files);
//   - record shards: PATH/index.json and its shards, written by gyre data pack.
// Internal to gyre::data.
#pragma once

#include <string>

namespace gyre::data::detail {

enum class DataKind { kImageFolders, kTables, kRecords };

struct DataRoot {
  DataKind kind = DataKind::kImageFolders;
  std::string train;  // the training split's folder or file (records: PATH)
  std::string test;   // the test split's (records: PATH)
};

// Throws gyre::Error naming PATH and the layouts it may have when it has none of them.
DataRoot describeDataRoot(const std::string& path);

const char* kindName(DataKind kind);

}  // namespace gyre::data::detail
