// An image folder's files (ROOT/CLASS/NAME.png|.jpg, as torchvision's ImageFolder lists them) and
// reading a file whole, libtorch-free. Internal to gyre::data (image folders, gyre data pack).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gyre::data::detail {

struct ImageListing {
  std::vector<std::string> classes;  // the class folders' names, sorted
  std::vector<std::string> files;    // every image, class by class, each class's in name order
  std::vector<std::int64_t> labels;  // files[i]'s class index
};

// .png, .jpg or .jpeg in any case.
bool isImageName(const std::string& path);

// Throws gyre::Error naming the folder: ROOT missing or not a directory, without class folders,
// a class folder without images, or a folder that cannot be listed.
ImageListing listImageFolder(const std::string& root);

// The whole file, or an empty vector with `why` set ("cannot be opened (No such file ...)").
std::vector<std::uint8_t> readFileBytes(const std::string& path, std::string& why);

// The mean and (population) standard deviation of 8-bit pixels scaled to [0, 1], from their exact
// sum and sum of squares over `count` pixels: the image folders and the packer agree to the bit.
void pixelMoments(std::uint64_t sum, std::uint64_t squares, std::uint64_t count, double& mean, double& std);

}  // namespace gyre::data::detail
