#include "data.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>

#include "data/pack.h"
#include "data/records.h"
#include "gyre/errors.h"

namespace gyre::app {
namespace {

struct DataOptions {
  std::string source, dest, dir;
  std::string shardSize = "64MB";
  int threads = 0;
  std::int64_t skipBadRecords = 0;
  std::string labelColumn = "label";
  bool verify = false;
};

// "64MB", "1GiB", "500k", "4096": bytes (K/M/G by 1000, KiB/MiB/GiB by 1024).
std::int64_t parseSize(const std::string& text) {
  std::size_t end = 0;
  double value = 0;
  try {
    value = std::stod(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  std::string unit = text.substr(end);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  if (unit == "k" || unit == "kb") scale = 1e3;
  if (unit == "m" || unit == "mb") scale = 1e6;
  if (unit == "g" || unit == "gb") scale = 1e9;
  if (unit == "kib") scale = 1024.0;
  if (unit == "mib") scale = 1024.0 * 1024;
  if (unit == "gib") scale = 1024.0 * 1024 * 1024;
  if (end == 0 || scale == 0 || !(value * scale >= 1) || value * scale > 1e15)
    throw InvalidArgument("--shard-size " + text + " is not a size: give bytes, or a number with KB, MB, GB (or KiB, MiB, GiB)");
  return static_cast<std::int64_t>(std::llround(value * scale));
}

std::string megabytes(std::int64_t bytes) { return fmt::format("{:.1f} MB", static_cast<double>(bytes) / 1e6); }

void printSplits(const data::detail::RecordManifest& m) {
  for (const auto& [name, split] : m.splits) {
    std::int64_t bytes = 0;
    for (const data::detail::RecordShard& s : split.shards) bytes += s.bytes;
    fmt::print("  {}: {} records in {} shard(s), {}\n", name, split.records, split.shards.size(), megabytes(bytes));
  }
}

void printShape(const data::detail::RecordManifest& m) {
  if (m.kind == "images") {
    fmt::print("  images: {}x{}, {} channel(s), {} classes\n", m.width, m.height, m.channels, m.classes.size());
  } else {
    fmt::print("  features: {} columns, {} classes\n", m.features.size(), m.classes.size());
  }
}

int pack(const DataOptions& o) {
  data::detail::PackOptions p;
  p.shardBytes = parseSize(o.shardSize);
  p.threads = o.threads;
  p.skipBadRecords = o.skipBadRecords;
  p.labelColumn = o.labelColumn;
  const auto begin = std::chrono::steady_clock::now();
  const data::detail::RecordManifest m = data::detail::packDataSet(o.source, o.dest, p);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  fmt::print("gyre data pack: {} ({}) -> {} in {:.1f} s\n", o.source, m.kind, o.dest, seconds);
  printShape(m);
  printSplits(m);
  if (!m.skipped.empty()) {
    fmt::print("  left out {} bad sample(s) (--skip-bad-records {}):\n", m.skipped.size(), o.skipBadRecords);
    for (const std::string& s : m.skipped) fmt::print("    {}\n", s);
  }
  fmt::print("Train on it: gyre train --data {}\n", o.dest);
  return 0;
}

int info(const DataOptions& o) {
  const data::detail::RecordManifest m = data::detail::readRecordManifest(o.dir);
  fmt::print("{}: packed from {}\n", o.dir, m.source.empty() ? "?" : m.source);
  printShape(m);
  printSplits(m);
  std::int64_t bad = 0;
  for (const auto& [name, split] : m.splits) {
    const data::detail::RecordReader reader(o.dir, name, split);  // every shard's footer
    if (!o.verify) continue;
    std::int64_t label = 0;
    std::vector<std::uint8_t> sample;
    for (std::int64_t i = 0; i < reader.size(); ++i) {
      const std::string why = reader.read(i, label, sample);
      const bool known = why.empty() && label >= 0 && label < static_cast<std::int64_t>(m.classes.size());
      if (known) continue;
      ++bad;
      fmt::print(stderr, "{}: {}\n", reader.where(i), why.empty() ? "has label " + std::to_string(label) + ", outside the classes" : why);
    }
  }
  if (bad > 0) throw Error(o.dir + " has " + std::to_string(bad) + " bad record(s)");
  fmt::print("  shards: {}\n", o.verify ? "every record read and its CRC checked" : "every index read (--verify reads every record)");
  return 0;
}

}  // namespace

void addData(CLI::App& app, std::function<int()>& action) {
  auto o = std::make_shared<DataOptions>();
  CLI::App* cmd = app.add_subcommand("data", "Data sets: pack a folder into record shards, describe a packed set");
  cmd->require_subcommand(1);
  CLI::App* packCmd = cmd->add_subcommand("pack", "Pack a data set's folder (image folders or tables) into record shards");
  packCmd->add_option("SRC", o->source, "What gyre train --data reads: SRC/train/CLASS/*.png and SRC/test/...; or SRC/train.csv and SRC/test.csv (or .jsonl)")
      ->required();
  packCmd->add_option("DEST", o->dest, "A new (or empty) folder for the shards and their index.json")->required();
  packCmd->add_option("--shard-size", o->shardSize, "Close a shard once it holds this many bytes (64MB, 1GiB, ...)")
      ->capture_default_str();
  packCmd->add_option("--threads", o->threads, "Threads checking the images (0: one per core)")->check(CLI::NonNegativeNumber);
  packCmd->add_option("--skip-bad-records", o->skipBadRecords,
                      "Leave out up to N images or rows that cannot be read (listed); one more is an error")
      ->check(CLI::NonNegativeNumber);
  packCmd->add_option("--label-column", o->labelColumn, "Tables: the column (or JSON key) holding the label")
      ->capture_default_str();
  packCmd->footer(
      "Images are stored as their files' bytes (each decoded once here to check it, and for the training\n"
      "split's mean and standard deviation); table rows as float32 features. gyre train --data DEST then\n"
      "reads each batch's records as it needs them, so a worker holds its batches, not the whole set.\n"
      "The format: docs/data.md (Record shards).\n\n"
      "Example:\n"
      "  gyre data pack fashion fashion-packed --shard-size 16MB && gyre train --data fashion-packed --np 2");
  packCmd->callback([o, &action] { action = [o] { return pack(*o); }; });
  CLI::App* infoCmd = cmd->add_subcommand("info", "Describe a packed set and check its shards");
  infoCmd->add_option("DIR", o->dir, "A folder gyre data pack wrote")->required();
  infoCmd->add_flag("--verify", o->verify, "Read every record and check its CRC and label");
  infoCmd->callback([o, &action] { action = [o] { return info(*o); }; });
}

}  // namespace gyre::app
