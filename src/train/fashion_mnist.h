// Fashion-MNIST (Xiao et al. 2017) as Debian's dataset-fashion-mnist package installs it: four
// gzip-compressed IDX files, 60,000 training and 10,000 test images of 28x28 grey pixels in ten
// classes.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gyre::train {

// Where the Debian package puts the files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// One split: images [N, 1, 28, 28] float32, normalised as (x / 255 - 0.2860) / 0.3530 (the
// training set's mean and standard deviation), and labels [N] int64 in 0..9.
struct ImageSet {
  ::torch::Tensor images;
  ::torch::Tensor labels;
  std::int64_t size() const { return labels.size(0); }
};

struct FashionMnist {
  ImageSet train;
  ImageSet test;
};

// Loads both splits from `dir` (empty: kFashionMnistDir). Throws gyre::Error when the directory
// or a file is missing (naming the package to install), and when a file is unreadable, not an
// IDX file of the expected kind, truncated, or disagrees with its partner (naming the file).
FashionMnist loadFashionMnist(const std::string& dir = "");
// One split: "train" or "t10k".
ImageSet loadFashionMnistSplit(const std::string& dir, const std::string& split);

// The contents of one IDX file (gzip-compressed or not): its dimensions and its bytes. Checks the
// magic number (unsigned bytes, `rank` dimensions) and that the data is complete, with nothing
// after it. Throws gyre::Error naming the file.
struct IdxArray {
  std::vector<std::int64_t> dims;
  std::vector<std::uint8_t> data;
};
IdxArray readIdxFile(const std::string& path, int rank);

}  // namespace gyre::train
