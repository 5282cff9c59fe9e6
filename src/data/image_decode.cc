// PNG through libpng's simplified API, JPEG through libjpeg(-turbo) with its errors and warnings
// turned into a returned message (longjmp back to the call; nothing with a destructor lives
// between the setjmp and the library calls).
#include "data/image_decode.h"

// clang-format off
#include <cstdio>  // before jpeglib.h, which uses FILE
#include <jpeglib.h>
// clang-format on
#include <png.h>

#include <csetjmp>
#include <cstring>

namespace gyre::data::detail {
namespace {

// Interleaved pixels (RGBRGB...) to one plane per channel (RR...GG...BB...).
void toPlanar(const std::vector<std::uint8_t>& interleaved, int channels, std::size_t plane, std::uint8_t* out) {
  if (channels == 1) {
    std::memcpy(out, interleaved.data(), plane);
    return;
  }
  for (std::size_t i = 0; i < plane; ++i)
    for (int c = 0; c < channels; ++c) out[c * plane + i] = interleaved[i * channels + c];
}

std::string pngHeader(const std::vector<std::uint8_t>& bytes, png_image& image) {
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  if (png_image_begin_read_from_memory(&image, bytes.data(), bytes.size()) == 0) {
    std::string why = image.message;
    png_image_free(&image);
    return "not a readable PNG (" + why + ")";
  }
  return "";
}

std::string decodePng(const std::vector<std::uint8_t>& bytes, int channels, std::uint8_t* out,
                      std::vector<std::uint8_t>& interleaved) {
  png_image image;
  if (std::string why = pngHeader(bytes, image); !why.empty()) return why;
  image.format = channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  const std::size_t plane = static_cast<std::size_t>(image.width) * image.height;
  interleaved.resize(PNG_IMAGE_SIZE(image));
  if (png_image_finish_read(&image, nullptr, interleaved.data(), 0, nullptr) == 0) {
    std::string why = image.message;
    png_image_free(&image);
    return "a damaged PNG (" + why + ")";
  }
  toPlanar(interleaved, channels, plane, out);
  return "";
}

struct JpegErrors {
  jpeg_error_mgr manager;
  std::jmp_buf back;
  char message[JMSG_LENGTH_MAX];
};

void jpegFail(j_common_ptr info) {
  auto* e = reinterpret_cast<JpegErrors*>(info->err);
  (*info->err->format_message)(info, e->message);
  std::longjmp(e->back, 1);
}

// Warnings (msg_level -1: a truncated file, a corrupt segment) are failures too: libjpeg would
// fill the missing rows with grey and go on.
void jpegMessage(j_common_ptr info, int level) {
  if (level < 0) jpegFail(info);
}

// Reads the header, and with `out` the pixels (RGB or grayscale, interleaved) into `rows`.
// Returns false with e.message set.
bool runJpeg(const std::vector<std::uint8_t>& bytes, int channels, ImageHeader& header, std::uint8_t* rows,
             JpegErrors& e) {
  jpeg_decompress_struct info;
  info.err = jpeg_std_error(&e.manager);
  e.manager.error_exit = jpegFail;
  e.manager.emit_message = jpegMessage;
  if (setjmp(e.back) != 0) {
    jpeg_destroy_decompress(&info);
    return false;
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&info, TRUE);
  header.width = static_cast<int>(info.image_width);
  header.height = static_cast<int>(info.image_height);
  header.channels = info.num_components == 1 ? 1 : 3;
  if (rows != nullptr) {
    info.out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(&info);
    const std::size_t stride = static_cast<std::size_t>(info.output_width) * info.output_components;
    while (info.output_scanline < info.output_height) {
      JSAMPROW row = rows + info.output_scanline * stride;
      jpeg_read_scanlines(&info, &row, 1);
    }
    jpeg_finish_decompress(&info);
  }
  jpeg_destroy_decompress(&info);
  return true;
}

}  // namespace

ImageFormat formatOf(const std::vector<std::uint8_t>& bytes) {
  static constexpr std::uint8_t kPng[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (bytes.size() >= sizeof kPng && std::memcmp(bytes.data(), kPng, sizeof kPng) == 0) return ImageFormat::kPng;
  if (bytes.size() >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff) return ImageFormat::kJpeg;
  return ImageFormat::kUnknown;
}

std::string readHeader(const std::vector<std::uint8_t>& bytes, ImageHeader& header) {
  switch (formatOf(bytes)) {
    case ImageFormat::kPng: {
      png_image image;
      if (std::string why = pngHeader(bytes, image); !why.empty()) return why;
      header.width = static_cast<int>(image.width);
      header.height = static_cast<int>(image.height);
      header.channels = (image.format & PNG_FORMAT_FLAG_COLOR) != 0 ? 3 : 1;
      png_image_free(&image);
      return "";
    }
    case ImageFormat::kJpeg: {
      JpegErrors e;
      if (!runJpeg(bytes, 1, header, nullptr, e)) return std::string("not a readable JPEG (") + e.message + ")";
      return "";
    }
    case ImageFormat::kUnknown:
      break;
  }
  return bytes.empty() ? "an empty file" : "neither a PNG nor a JPEG file (by its first bytes)";
}

std::string decode(const std::vector<std::uint8_t>& bytes, int channels, const ImageHeader& header,
                   std::uint8_t* out) {
  thread_local std::vector<std::uint8_t> interleaved;
  const ImageFormat format = formatOf(bytes);
  if (format == ImageFormat::kPng) return decodePng(bytes, channels, out, interleaved);
  if (format != ImageFormat::kJpeg) return "neither a PNG nor a JPEG file (by its first bytes)";
  const std::size_t plane = static_cast<std::size_t>(header.width) * header.height;
  interleaved.resize(plane * channels);
  JpegErrors e;
  ImageHeader seen;
  if (!runJpeg(bytes, channels, seen, interleaved.data(), e)) return std::string("a damaged JPEG (") + e.message + ")";
  toPlanar(interleaved, channels, plane, out);
  return "";
}

std::string decodeSized(const std::vector<std::uint8_t>& bytes, const ImageHeader& shape, ImageHeader& header,
                        std::uint8_t* out) {
  if (std::string why = readHeader(bytes, header); !why.empty()) return why;
  if (header.width != shape.width || header.height != shape.height) {
    const auto text = [](const ImageHeader& h) {
      return std::to_string(h.width) + "x" + std::to_string(h.height) + (h.channels == 1 ? " grayscale" : " colour");
    };
    return "is " + text(header) + " where the first image is " + text(shape) +
           " (every image of a set must have one size)";
  }
  return decode(bytes, shape.channels, header, out);
}

}  // namespace gyre::data::detail
