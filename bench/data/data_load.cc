// gyre_data_load: how fast gyre::data reads a data set, for `gyre bench data`.
//
//   gyre_data_load ROOT --threads T [--channels 1|3] [--mean M --std S]
//   gyre_data_load --records DIR --threads T [--batch B]
//
// Loads ROOT with loadImageFolder (every image decoded and normalised into one float tensor), or
// reads the training split of DIR (record shards, gyre data pack) batch by batch through a Loader
// on T threads in a shuffled order, as training does, keeping no batch; prints one JSON line:
// {"loader":"gyre"|"gyre-records","threads":T,"images":N,"seconds":S,"images_per_s":R,
// "peak_rss_mb":M}, the time taken inside the process (the program's start is not counted, as the
// torchvision baseline's is not) and the process's peak resident memory.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

#include "gyre/torch/data.h"
#include "gyre/torch/data_files.h"

namespace {

// VmHWM: the process's peak resident set, in MiB.
double peakRssMb() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

void print(const char* loader, int threads, std::int64_t images, double seconds) {
  std::printf(
      "{\"loader\":\"%s\",\"threads\":%d,\"images\":%lld,\"seconds\":%.6f,\"images_per_s\":%.1f,"
      "\"peak_rss_mb\":%.1f}\n",
      loader, threads, static_cast<long long>(images), seconds, static_cast<double>(images) / seconds, peakRssMb());
}

// Every batch of the training split once, in a shuffled order, on `threads` loader threads.
int readRecords(const std::string& dir, int threads, std::int64_t batch) {
  const auto begin = std::chrono::steady_clock::now();
  auto records = std::make_shared<gyre::data::RecordSet>(dir);
  gyre::data::DistributedBatchSampler sampler(records->size(), 1, 0, batch, {.seed = 0, .dropLastBatch = false});
  gyre::data::Loader loader(records, sampler, {.workers = threads, .prefetch = 2 * threads});
  std::int64_t images = 0;
  while (gyre::data::Batch b = loader.next()) images += b.size();
  print("gyre-records", threads, images, std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app("gyre_data_load: time gyre::data::loadImageFolder on one folder");
  std::string root;
  gyre::data::ImageFolderOptions o;
  double mean = 0.5, std = 0.5;
  std::string records;
  std::int64_t batch = 256;
  app.add_option("root", root, "The image folder (ROOT/CLASS/*.png|*.jpg)");
  app.add_option("--records", records, "Read the training split of these record shards instead");
  app.add_option("--batch", batch, "--records: the batch size")->check(CLI::PositiveNumber);
  app.add_option("--threads", o.threads, "Decoding threads")->check(CLI::PositiveNumber);
  o.channels = 1;
  app.add_option("--channels", o.channels, "1 (grayscale) or 3 (RGB)")->check(CLI::IsMember({1, 3}));
  app.add_option("--mean", mean, "The normalisation's mean, every channel");
  app.add_option("--std", std, "The normalisation's standard deviation, every channel");
  CLI11_PARSE(app, argc, argv);
  if (!records.empty()) return readRecords(records, std::max(o.threads, 1), batch);
  if (root.empty()) throw std::invalid_argument("give an image folder, or --records DIR");
  // Given figures, as the baseline's Normalize takes: no pass over the set to compute them.
  o.mean.assign(static_cast<std::size_t>(o.channels), mean);
  o.std.assign(static_cast<std::size_t>(o.channels), std);
  const auto begin = std::chrono::steady_clock::now();
  const gyre::data::ImageFolder set = gyre::data::loadImageFolder(root, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  print("gyre", o.threads, set.data.size(), seconds);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "gyre_data_load: %s\n", e.what());
  return 1;
}
