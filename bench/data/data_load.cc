// gyre_data_load: how fast gyre::data::loadImageFolder reads an image folder, for `gyre bench data`.
//
//   gyre_data_load ROOT --threads T [--channels 1|3] [--mean M --std S]
//
// Loads ROOT (every image decoded and normalised into one float tensor) and prints one JSON line:
// {"loader":"gyre","threads":T,"images":N,"seconds":S,"images_per_s":R}, the time taken inside the
// process (the program's start is not counted, as the torchvision baseline's is not).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <exception>

#include "gyre/torch/data.h"

int main(int argc, char** argv) try {
  CLI::App app("gyre_data_load: time gyre::data::loadImageFolder on one folder");
  std::string root;
  gyre::data::ImageFolderOptions o;
  double mean = 0.5, std = 0.5;
  app.add_option("root", root, "The image folder (ROOT/CLASS/*.png|*.jpg)")->required();
  app.add_option("--threads", o.threads, "Decoding threads")->check(CLI::PositiveNumber);
  o.channels = 1;
  app.add_option("--channels", o.channels, "1 (grayscale) or 3 (RGB)")->check(CLI::IsMember({1, 3}));
  app.add_option("--mean", mean, "The normalisation's mean, every channel");
  app.add_option("--std", std, "The normalisation's standard deviation, every channel");
  CLI11_PARSE(app, argc, argv);
  // Given figures, as the baseline's Normalize takes: no pass over the set to compute them.
  o.mean.assign(static_cast<std::size_t>(o.channels), mean);
  o.std.assign(static_cast<std::size_t>(o.channels), std);
  const auto begin = std::chrono::steady_clock::now();
  const gyre::data::ImageFolder set = gyre::data::loadImageFolder(root, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  const auto images = set.data.size();
  std::printf("{\"loader\":\"gyre\",\"threads\":%d,\"images\":%lld,\"seconds\":%.6f,\"images_per_s\":%.1f}\n",
              o.threads, static_cast<long long>(images), seconds, static_cast<double>(images) / seconds);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "gyre_data_load: %s\n", e.what());
  return 1;
}
