// Decoding one PNG or JPEG file's bytes into 8-bit pixels, with Debian's libpng and
// libjpeg-turbo. Internal to gyre::data (the image folders and record shards).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gyre::data::detail {

enum class ImageFormat : std::uint8_t { kUnknown, kPng, kJpeg };

// By the magic bytes at the start, not by the file's name.
ImageFormat formatOf(const std::vector<std::uint8_t>& bytes);

struct ImageHeader {
  int width = 0;
  int height = 0;
  int channels = 0;  // 1 (grayscale, with or without alpha) or 3 (colour)
};

// The header alone. Returns an empty string, or why the bytes are not a readable image.
std::string readHeader(const std::vector<std::uint8_t>& bytes, ImageHeader& header);

// The pixels as `channels` (1: grayscale, 3: RGB) 8-bit planes of height x width, row by row,
// channel after channel (CHW), into `out` (channels * height * width bytes): colour converted to
// grayscale or back as the libraries do, alpha dropped. Returns an empty string, or why the
// bytes could not be decoded (a truncated or corrupt file: libjpeg's warnings count as errors).
std::string decode(const std::vector<std::uint8_t>& bytes, int channels, const ImageHeader& header,
                   std::uint8_t* out);

// An image of a set whose images all have `shape`'s width and height: decoded (as decode()) into
// shape.channels planes at `out`. Returns an empty string, or why not: unreadable, corrupt, or of
// another size ("is 5x4 grayscale where the first image is 6x5 grayscale (every image of a set
// must have one size)"). `header` gets the image's own header when it could be read.
std::string decodeSized(const std::vector<std::uint8_t>& bytes, const ImageHeader& shape, ImageHeader& header,
                        std::uint8_t* out);

}  // namespace gyre::data::detail
