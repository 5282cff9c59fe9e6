// gyre::data's files beyond IDX and image folders (docs/data.md): tables of numeric features
// (CSV, JSON lines), loaded whole, and record shards (`gyre data pack`), read batch by batch.
//
//   auto train = gyre::data::loadTable("iris/train.csv", {.labelColumn = "species"});
//   auto test = gyre::data::loadTable("iris/test.csv", {.labelColumn = "species", .classes = train.classes,
//                                                       .mean = train.mean, .std = train.std});
//
//   auto records = std::make_shared<gyre::data::RecordSet>("packed");   // its "train" split
//   gyre::data::Loader loader(records, sampler.batches(), {.workers = 2});
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gyre/torch/data.h"

namespace gyre::data {

// ---------------------------------------------------------------------------------------------
// Tables

struct TableOptions {
  // The label's column (CSV header name, or JSON key); every other column is a feature.
  std::string labelColumn = "label";
  // The classes in label order; empty: the table's own ("0" .. "K" when every label is a whole
  // number, so label k is class k; the sorted names otherwise). Give the training split's to its
  // test split: a label not among them is an error naming the line.
  std::vector<std::string> classes = {};
  // Features standardised as (x - mean) / std per column; empty: the table's own figures (a
  // constant column's std taken as 1). standardize = false keeps them as written.
  bool standardize = true;
  std::vector<double> mean = {};
  std::vector<double> std = {};
  // Up to this many bad rows are left out and listed; one more is an error.
  std::int64_t skipBadRecords = 0;
};

struct Table {
  Dataset data;                      // images: the features [N, F] float32; labels [N] int64
  std::vector<std::string> classes;  // label k is classes[k]
  std::vector<std::string> columns;  // the features' names (a JSON array "x" gives x[0], x[1], ...)
  std::vector<double> mean, std;     // the standardisation applied (empty with standardize = false)
  std::vector<std::string> skipped;  // "FILE:LINE: why", for each row left out
};

// A CSV file (.csv: a header line, then a row per line) or JSON lines (.jsonl, .ndjson: an object
// per line, every key but the label a number or an array of numbers). Throws gyre::Error naming
// the file and line: a row with too few or too many fields, a field that is not a finite number,
// an empty or unknown label (beyond skipBadRecords), no label column, an empty file;
// InvalidArgument for bad options.
Table loadTable(const std::string& path, const TableOptions& options = {});

// ---------------------------------------------------------------------------------------------
// Record shards

struct RecordSetOptions {
  std::string split = "train";  // "train", "test" (or "val"): as packed
  // Images: resized to height x width (bilinear); 0 x 0: the packed size.
  int height = 0;
  int width = 0;
  // Up to this many records that cannot be read or decoded (a damaged or truncated shard) are
  // left out of their batches and listed by skipped(); one more is an error naming the shard and
  // the record.
  std::int64_t skipBadRecords = 0;
};

// One split of a packed set (`gyre data pack SRC DIR`; the format: docs/data.md), as a Source: it
// keeps each shard open and its index in memory (8 bytes a record), and reads and decodes each
// sample when a batch asks for it, on the thread that gathers the batch (a Loader's workers), so
// a worker reads only its own samples and holds only its batches in flight. Images come out
// [N, C, H, W] normalised with the training split's mean and std per channel; features [N, F]
// standardised with the training split's figures.
class RecordSet final : public Source {
 public:
  // Throws gyre::Error naming DIR/index.json or the shard: not a packed set, no such split, a
  // shard missing, truncated or holding another number of records; InvalidArgument for bad options.
  explicit RecordSet(const std::string& dir, RecordSetOptions options = {});
  ~RecordSet() override;
  RecordSet(const RecordSet&) = delete;
  RecordSet& operator=(const RecordSet&) = delete;

  std::int64_t size() const override;
  Batch gather(const std::vector<std::int64_t>& indices, std::int64_t index) const override;
  std::vector<std::string> skipped() const override;

  bool images() const;                         // "images" or "features" when packed
  std::vector<std::int64_t> sampleShape() const;  // [C, H, W] (after resizing) or [F]
  const std::vector<std::string>& classes() const;
  const std::vector<std::string>& columns() const;  // features: their names
  const std::vector<double>& mean() const;
  const std::vector<double>& std() const;
  // Every sample in order, decoded on `threads` threads (0: one per core): a test split in memory.
  Dataset load(int threads = 0) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gyre::data
