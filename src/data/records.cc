// Record shards: the writer appends records and closes each shard with its footer; the reader
// keeps each shard open and its footer in memory, and preads one record at a time.
#include "data/records.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gyre/errors.h"

namespace gyre::data::detail {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr std::size_t kMagicBytes = 8;
constexpr std::size_t kHeadBytes = 8;   // u32 length, u32 CRC
constexpr std::size_t kLabelBytes = 8;  // i64
constexpr int kVersion = 1;

void putU32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
void putU64(std::uint8_t* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint32_t getU32(const std::uint8_t* p) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
std::uint64_t getU64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::uint32_t crcOf(const std::uint8_t* data, std::size_t bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (bytes > 0) {  // zlib takes a uInt at a time
    const auto n = static_cast<uInt>(std::min<std::size_t>(bytes, 1U << 30));
    crc = crc32(crc, data, n);
    data += n;
    bytes -= n;
  }
  return static_cast<std::uint32_t>(crc);
}

std::string systemError() { return std::strerror(errno); }

// Exactly `bytes` at `offset`, or why not.
std::string preadAll(int fd, std::uint8_t* out, std::size_t bytes, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd, out + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return "cannot be read (" + systemError() + ")";
    if (n == 0) return "ends early (truncated?)";
    done += static_cast<std::size_t>(n);
  }
  return "";
}

}  // namespace

RecordManifest readRecordManifest(const std::string& dir) {
  const std::string path = (fs::path(dir) / kRecordManifestName).string();
  std::ifstream in(path);
  if (!in) throw Error(path + " cannot be opened (" + systemError() + "): not a packed data set (gyre data pack)");
  Json j;
  try {
    j = Json::parse(in);
    if (j.value("format", "") != "gyre-records")
      throw Error(path + " is not a gyre record manifest (its \"format\" is not \"gyre-records\")");
    if (j.value("version", 0) != kVersion)
      throw Error(path + " is version " + std::to_string(j.value("version", 0)) + " of the record format; this gyre reads " +
                  std::to_string(kVersion));
    RecordManifest m;
    m.kind = j.at("kind").get<std::string>();
    if (m.kind != "images" && m.kind != "features")
      throw Error(path + ": kind \"" + m.kind + "\" is neither \"images\" nor \"features\"");
    m.classes = j.at("classes").get<std::vector<std::string>>();
    m.channels = j.value("channels", 0);
    m.height = j.value("height", 0);
    m.width = j.value("width", 0);
    m.features = j.value("features", std::vector<std::string>{});
    m.mean = j.at("mean").get<std::vector<double>>();
    m.std = j.at("std").get<std::vector<double>>();
    m.skipped = j.value("skipped", std::vector<std::string>{});
    m.source = j.value("source", "");
    for (const auto& [name, s] : j.at("splits").items()) {
      RecordSplit split;
      split.records = s.at("records").get<std::int64_t>();
      for (const Json& shard : s.at("shards"))
        split.shards.push_back({shard.at("file").get<std::string>(), shard.at("records").get<std::int64_t>(),
                                shard.at("bytes").get<std::int64_t>()});
      m.splits.emplace(name, std::move(split));
    }
    if (m.classes.empty()) throw Error(path + " lists no classes");
    const std::size_t per = m.kind == "images" ? static_cast<std::size_t>(m.channels) : m.features.size();
    if (per == 0 || m.mean.size() != per || m.std.size() != per)
      throw Error(path + ": the mean and std must have one figure per " +
                  (m.kind == "images" ? std::string("channel") : std::string("feature")));
    return m;
  } catch (const Json::exception& e) {
    throw Error(path + " is not a valid record manifest: " + e.what());
  }
}

void writeRecordManifest(const std::string& dir, const RecordManifest& m) {
  Json j = {{"format", "gyre-records"}, {"version", kVersion}, {"kind", m.kind}, {"classes", m.classes},
            {"mean", m.mean}, {"std", m.std}, {"skipped", m.skipped}, {"source", m.source}};
  if (m.kind == "images") {
    j["channels"] = m.channels;
    j["height"] = m.height;
    j["width"] = m.width;
  } else {
    j["features"] = m.features;
  }
  Json splits = Json::object();
  for (const auto& [name, split] : m.splits) {
    Json shards = Json::array();
    for (const RecordShard& s : split.shards)
      shards.push_back({{"file", s.file}, {"records", s.records}, {"bytes", s.bytes}});
    splits[name] = {{"records", split.records}, {"shards", shards}};
  }
  j["splits"] = splits;
  const std::string path = (fs::path(dir) / kRecordManifestName).string();
  const std::string temporary = path + ".partial";
  {
    std::ofstream out(temporary);
    out << j.dump(1) << "\n";
    out.flush();
    if (!out) throw Error("cannot write " + temporary + " (" + systemError() + ")");
  }
  std::error_code ec;
  fs::rename(temporary, path, ec);
  if (ec) throw Error("cannot rename " + temporary + " to " + path + ": " + ec.message());
}

// ---------------------------------------------------------------------------------------------

RecordWriter::RecordWriter(std::string dir, std::string split, std::int64_t shardBytes)
    : dir_(std::move(dir)), split_(std::move(split)), shardBytes_(shardBytes) {
  if (shardBytes_ < 1) throw InvalidArgument("RecordWriter: the shard size must be at least 1 byte");
}

RecordWriter::~RecordWriter() {
  if (file_) std::fclose(file_);
}

void RecordWriter::open() {
  char name[64];
  std::snprintf(name, sizeof name, "-%05zu.gyrec", done_.shards.size());
  const std::string file = split_ + name;
  path_ = (fs::path(dir_) / file).string();
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_) throw Error("cannot create " + path_ + " (" + systemError() + ")");
  written_.push_back(path_);
  done_.shards.push_back({file, 0, 0});
  offsets_.clear();
  if (std::fwrite(kRecordFileMagic, 1, kMagicBytes, file_) != kMagicBytes)
    throw Error("cannot write " + path_ + " (" + systemError() + ")");
  position_ = kMagicBytes;
}

void RecordWriter::close() {
  std::vector<std::uint8_t> footer(offsets_.size() * 8 + 8 + kMagicBytes);
  for (std::size_t i = 0; i < offsets_.size(); ++i) putU64(footer.data() + 8 * i, offsets_[i]);
  putU64(footer.data() + 8 * offsets_.size(), offsets_.size());
  std::memcpy(footer.data() + 8 * offsets_.size() + 8, kRecordIndexMagic, kMagicBytes);
  const bool wrote = std::fwrite(footer.data(), 1, footer.size(), file_) == footer.size();
  const bool flushed = wrote && std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
  const std::string why = systemError();
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!flushed || !closed) throw Error("cannot write " + path_ + " (" + why + ")");
  RecordShard& shard = done_.shards.back();
  shard.records = static_cast<std::int64_t>(offsets_.size());
  shard.bytes = static_cast<std::int64_t>(position_ + footer.size());
}

void RecordWriter::add(std::int64_t label, const std::uint8_t* sample, std::size_t bytes) {
  if (bytes + kLabelBytes > 0xffffffffU)
    throw InvalidArgument("RecordWriter: a sample of " + std::to_string(bytes) + " bytes is over the 4 GiB a record holds");
  if (!file_) open();
  std::vector<std::uint8_t> record(kHeadBytes + kLabelBytes + bytes);
  putU64(record.data() + kHeadBytes, static_cast<std::uint64_t>(label));
  if (bytes > 0) std::memcpy(record.data() + kHeadBytes + kLabelBytes, sample, bytes);
  putU32(record.data(), static_cast<std::uint32_t>(kLabelBytes + bytes));
  putU32(record.data() + 4, crcOf(record.data() + kHeadBytes, kLabelBytes + bytes));
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size())
    throw Error("cannot write " + path_ + " (" + systemError() + ")");
  offsets_.push_back(position_);
  position_ += record.size();
  ++done_.records;
  if (static_cast<std::int64_t>(position_) >= shardBytes_) close();
}

RecordSplit RecordWriter::finish() {
  if (file_) close();
  return done_;
}

void RecordWriter::remove() {
  if (file_) {
    std::fclose(file_);
    file_ = nullptr;
  }
  for (const std::string& path : written_) {
    std::error_code ec;
    fs::remove(path, ec);
  }
  written_.clear();
}

// ---------------------------------------------------------------------------------------------

RecordReader::RecordReader(const std::string& dir, const std::string& split, const RecordSplit& listing) {
  for (const RecordShard& s : listing.shards) {
    Shard shard;
    shard.path = (fs::path(dir) / s.file).string();
    shard.first = records_;
    shard.fd = ::open(shard.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (shard.fd < 0) {
      const std::string why = systemError();
      closeAll();  // the shards opened so far
      throw Error(shard.path + " (a shard of split " + split + ") cannot be opened (" + why + ")");
    }
    shards_.push_back(shard);
    Shard& open = shards_.back();
    const off_t end = ::lseek(open.fd, 0, SEEK_END);
    std::uint8_t tail[16];
    std::string why = end < static_cast<off_t>(kMagicBytes + sizeof tail)
                          ? "is too short to be a record shard"
                          : preadAll(open.fd, tail, sizeof tail, static_cast<std::uint64_t>(end) - sizeof tail);
    const std::uint64_t count = why.empty() ? getU64(tail) : 0;
    if (why.empty() && std::memcmp(tail + 8, kRecordIndexMagic, kMagicBytes) != 0)
      why = "has no record index at its end (not a record shard, or truncated)";
    if (why.empty() && count > static_cast<std::uint64_t>(end) / 8)
      why = "has a record index longer than the file (damaged)";
    if (why.empty() && static_cast<std::int64_t>(count) != s.records)
      why = "holds " + std::to_string(count) + " records where index.json says " + std::to_string(s.records);
    if (why.empty() && (count + 2) * 8 + kMagicBytes > static_cast<std::uint64_t>(end))
      why = "has a record index longer than the file (damaged)";
    if (why.empty()) {
      std::vector<std::uint8_t> index(count * 8);
      why = preadAll(open.fd, index.data(), index.size(), static_cast<std::uint64_t>(end) - 16 - index.size());
      open.offsets.resize(count);
      open.records = static_cast<std::uint64_t>(end) - 16 - index.size();
      for (std::uint64_t i = 0; why.empty() && i < count; ++i) open.offsets[i] = getU64(index.data() + 8 * i);
    }
    if (!why.empty()) {
      closeAll();
      throw Error(shard.path + " " + why);
    }
    records_ += static_cast<std::int64_t>(count);
  }
  if (records_ != listing.records) {
    const std::int64_t had = records_;
    closeAll();
    throw Error("split " + split + " of " + dir + " has " + std::to_string(had) + " records in its shards where index.json says " +
                std::to_string(listing.records));
  }
}

RecordReader::~RecordReader() { closeAll(); }

void RecordReader::closeAll() {
  for (Shard& s : shards_)
    if (s.fd >= 0) {
      ::close(s.fd);
      s.fd = -1;
    }
}

const RecordReader::Shard& RecordReader::shardOf(std::int64_t i) const {
  std::size_t lo = 0;
  std::size_t hi = shards_.size();
  while (hi - lo > 1) {  // the last shard whose first record is <= i
    const std::size_t mid = (lo + hi) / 2;
    if (shards_[mid].first <= i) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return shards_[lo];
}

std::string RecordReader::where(std::int64_t i) const {
  const Shard& s = shardOf(i);
  return s.path + ", record " + std::to_string(i - s.first);
}

std::string RecordReader::read(std::int64_t i, std::int64_t& label, std::vector<std::uint8_t>& sample) const {
  if (i < 0 || i >= records_) throw InvalidArgument("record " + std::to_string(i) + " is outside the split's " +
                                                    std::to_string(records_));
  const Shard& s = shardOf(i);
  const std::uint64_t offset = s.offsets[static_cast<std::size_t>(i - s.first)];
  std::uint8_t head[kHeadBytes];
  if (std::string why = preadAll(s.fd, head, kHeadBytes, offset); !why.empty()) return why;
  const std::uint32_t bytes = getU32(head);
  if (bytes < kLabelBytes) return "has a record too short to hold a label (damaged)";
  if (offset + kHeadBytes + bytes > s.records) return "has a record longer than its shard (damaged)";
  std::vector<std::uint8_t> payload(bytes);
  if (std::string why = preadAll(s.fd, payload.data(), bytes, offset + kHeadBytes); !why.empty()) return why;
  if (crcOf(payload.data(), bytes) != getU32(head + 4)) return "fails its CRC check (damaged)";
  label = static_cast<std::int64_t>(getU64(payload.data()));
  sample.assign(payload.begin() + kLabelBytes, payload.end());
  return "";
}

}  // namespace gyre::data::detail
