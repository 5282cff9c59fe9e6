// Record shards: gyre's one format for large data sets (written by `gyre data pack`, read by
// gyre::data::RecordSet and `gyre train --data`), libtorch-free. Internal to gyre::data; the
// format is documented in docs/data.md ("Record shards"):
//
//   DIR/index.json             the manifest (RecordManifest), written last
//   DIR/SPLIT-NNNNN.gyrec      a split's shards, each about --shard-size bytes:
//     "GYREREC1"                                         8 bytes
//     per record: u32 payload bytes | u32 CRC-32 of the payload | payload
//                 payload = i64 label | the sample (an image file's bytes, or float32 features)
//     footer:     u64 offset of each record's length field | u64 records | "GYREIDX1"
//   (integers little-endian)
//
// A reader needs only a shard's footer to find any record (pread at its offset), so reading
// memory is 8 bytes per record plus the batches being decoded, whatever the set's size.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gyre::data::detail {

inline constexpr char kRecordFileMagic[] = "GYREREC1";
inline constexpr char kRecordIndexMagic[] = "GYREIDX1";
inline constexpr const char* kRecordManifestName = "index.json";

struct RecordShard {
  std::string file;  // relative to the set's folder
  std::int64_t records = 0;
  std::int64_t bytes = 0;
};

struct RecordSplit {
  std::int64_t records = 0;
  std::vector<RecordShard> shards;
};

struct RecordManifest {
  std::string kind;                  // "images" (payload: a PNG or JPEG file) or "features" (float32)
  std::vector<std::string> classes;  // label k is classes[k]
  int channels = 0, height = 0, width = 0;  // images: every image's shape once decoded
  std::vector<std::string> features;        // features: the columns' names
  std::vector<double> mean, std;            // of the training split, per channel (pixels in [0, 1]) or feature
  std::map<std::string, RecordSplit> splits;
  std::vector<std::string> skipped;  // samples left out when packing, "FILE: why"
  std::string source;                // what was packed
};

// DIR/index.json. Throws gyre::Error naming the file when it is missing, not JSON, or not a
// manifest of this format and version.
RecordManifest readRecordManifest(const std::string& dir);
// Writes DIR/index.json through a temporary file and a rename: it appears whole or not at all.
void writeRecordManifest(const std::string& dir, const RecordManifest& manifest);

// Writes one split's records into shards of about `shardBytes` (a shard is closed once it holds
// that many). Throws gyre::Error naming the file on any write error (a full disk included);
// remove() deletes the shards written so far.
class RecordWriter {
 public:
  RecordWriter(std::string dir, std::string split, std::int64_t shardBytes);
  ~RecordWriter();
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  void add(std::int64_t label, const std::uint8_t* sample, std::size_t bytes);
  // Closes the last shard; the split as the manifest lists it.
  RecordSplit finish();
  // Deletes every shard written (after a failure).
  void remove();

 private:
  void open();
  void close();

  std::string dir_, split_;
  std::int64_t shardBytes_;
  RecordSplit done_;
  std::vector<std::string> written_;
  std::FILE* file_ = nullptr;
  std::string path_;
  std::vector<std::uint64_t> offsets_;
  std::uint64_t position_ = 0;
};

// One split's shards, opened once: each record read by pread, safe from several threads.
class RecordReader {
 public:
  // Opens every shard and reads its footer. Throws gyre::Error naming the shard when it is
  // missing, not a record shard, or holds another number of records than the manifest says.
  RecordReader(const std::string& dir, const std::string& split, const RecordSplit& listing);
  ~RecordReader();
  RecordReader(const RecordReader&) = delete;
  RecordReader& operator=(const RecordReader&) = delete;

  std::int64_t size() const { return records_; }
  // Record i's label and sample. Returns an empty string, or why it cannot be read (a short read:
  // the shard was truncated; a CRC mismatch: it was damaged).
  std::string read(std::int64_t i, std::int64_t& label, std::vector<std::uint8_t>& sample) const;
  // "DIR/train-00003.gyrec, record 17" for record i.
  std::string where(std::int64_t i) const;

 private:
  struct Shard {
    std::string path;
    int fd = -1;
    std::int64_t first = 0;  // the split's index of its first record
    std::uint64_t records = 0;  // bytes before the footer: where the records end
    std::vector<std::uint64_t> offsets;
  };
  const Shard& shardOf(std::int64_t i) const;
  void closeAll();

  std::vector<Shard> shards_;
  std::int64_t records_ = 0;
};

}  // namespace gyre::data::detail
