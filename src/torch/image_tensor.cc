#include "torch/image_tensor.h"

#include <cstring>

namespace gyre::data {

std::string decodeImage(const std::vector<std::uint8_t>& bytes, const detail::ImageHeader& shape, bool resize,
                        std::uint8_t* out) {
  detail::ImageHeader header;
  const std::string why = detail::decodeSized(bytes, shape, header, out);
  const bool otherSize = header.width > 0 && (header.width != shape.width || header.height != shape.height);
  if (!resize || !otherSize) return why;
  ::torch::Tensor own = ::torch::empty({1, shape.channels, header.height, header.width}, ::torch::kUInt8);
  if (std::string failed = detail::decode(bytes, shape.channels, header, own.data_ptr<std::uint8_t>()); !failed.empty())
    return failed;
  namespace F = ::torch::nn::functional;
  const ::torch::Tensor resized =
      F::interpolate(own.to(::torch::kFloat32), F::InterpolateFuncOptions()
                                                    .size(std::vector<std::int64_t>{shape.height, shape.width})
                                                    .mode(::torch::kBilinear)
                                                    .align_corners(false))
          .round_()
          .clamp_(0, 255)
          .to(::torch::kUInt8)
          .contiguous();
  std::memcpy(out, resized.data_ptr<std::uint8_t>(), static_cast<std::size_t>(resized.numel()));
  return "";
}

::torch::Tensor normalisedImages(const ::torch::Tensor& pixels, const std::vector<double>& mean,
                                 const std::vector<double>& std) {
  ::torch::Tensor images = pixels.to(::torch::kFloat32).div_(255);
  for (std::int64_t c = 0; c < images.size(1); ++c)
    images.select(1, c).sub_(mean[static_cast<std::size_t>(c)]).div_(std[static_cast<std::size_t>(c)]);
  return images;
}

}  // namespace gyre::data
