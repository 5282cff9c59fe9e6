// Images into tensors, shared by the image folders and the record shards: one image decoded (and
// resized) into its place in a uint8 batch, and a batch of pixels normalised. Internal to gyre::data.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/image_decode.h"

namespace gyre::data {

// Decodes an image file's `bytes` into shape.channels planes of shape.height x shape.width at
// `out`: as it is when it has that size; resized bilinearly (as torchvision's Resize on a tensor,
// rounded back to 8 bits) when `resize`; otherwise not at all. Returns an empty string, or why
// the bytes are not such an image.
std::string decodeImage(const std::vector<std::uint8_t>& bytes, const detail::ImageHeader& shape, bool resize,
                        std::uint8_t* out);

// uint8 pixels [N, C, H, W] as float32 (x / 255 - mean[c]) / std[c].
::torch::Tensor normalisedImages(const ::torch::Tensor& pixels, const std::vector<double>& mean,
                                 const std::vector<double>& std);

}  // namespace gyre::data
