// gyre data pack: a data set's folder (image folders or tables, data/data_root.h) written as
// record shards (data/records.h), libtorch-free, so the gyre tool packs without libtorch.
// Internal to gyre::data and the gyre tool.
#pragma once

#include <cstdint>
#include <string>

#include "data/records.h"

namespace gyre::data::detail {

struct PackOptions {
  std::int64_t shardBytes = std::int64_t{64} << 20;  // a shard is closed once it holds this many bytes
  int threads = 0;                                   // decoding threads that check the images; 0: one per core
  std::int64_t skipBadRecords = 0;                   // images or rows left out (listed) before one is an error
  std::string labelColumn = "label";                 // tables: the label's column
};

// Packs both splits of `source` into `dest` (created; it must not exist or be empty). Images are
// stored as their files' bytes, each decoded once here to check it (a corrupt or truncated image,
// or one of another size than the first, is bad) and to take the training split's mean and
// standard deviation per channel; table rows as float32 features, with each feature's mean and
// standard deviation. The manifest is written last. Throws gyre::Error naming the file (and line)
// on bad input beyond skipBadRecords or on a write error (the shards written are removed).
RecordManifest packDataSet(const std::string& source, const std::string& dest, const PackOptions& options);

}  // namespace gyre::data::detail
