// gyre::data::readIdxFile: IDX files through zlib, which reads gzip-compressed and plain files
// alike.
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "gyre/errors.h"
#include "gyre/torch/data.h"

namespace gyre::data {
namespace {

std::vector<std::uint8_t> readAll(const std::string& path) {
  struct Closer {
    void operator()(gzFile_s* f) const { gzclose(f); }
  };
  errno = 0;
  std::unique_ptr<gzFile_s, Closer> file(gzopen(path.c_str(), "rb"));
  if (!file) throw Error("cannot open " + path + ": " + std::strerror(errno != 0 ? errno : ENOMEM));
  std::vector<std::uint8_t> out;
  std::vector<std::uint8_t> chunk(1 << 20);
  for (;;) {
    const int n = gzread(file.get(), chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) {
      int code = 0;
      const char* zlibWhy = gzerror(file.get(), &code);
      const std::string why = code == Z_ERRNO ? std::strerror(errno) : zlibWhy ? zlibWhy : "zlib error";
      throw Error("cannot read " + path + ": " + why + " (a damaged download? reinstall the package)");
    }
    if (n == 0) break;
    out.insert(out.end(), chunk.begin(), chunk.begin() + n);
  }
  return out;
}

}  // namespace

IdxArray readIdxFile(const std::string& path, int rank) {
  std::vector<std::uint8_t> bytes = readAll(path);
  const std::size_t header = 4 + 4 * static_cast<std::size_t>(rank);
  if (bytes.size() < header)
    throw Error(path + " is not an IDX file: " + std::to_string(bytes.size()) +
                " bytes, shorter than its header");
  // Magic number: two zero bytes, the element type (0x08: unsigned byte), the number of dimensions.
  if (bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08 || bytes[3] != rank) {
    char magic[16];
    std::snprintf(magic, sizeof magic, "%02x%02x%02x%02x", bytes[0], bytes[1], bytes[2], bytes[3]);
    throw Error(path + " is not an IDX file of unsigned bytes with " + std::to_string(rank) +
                " dimensions (magic number 0x" + magic + ", expected 0x000008" + (rank < 16 ? "0" : "") +
                std::to_string(rank) + ")");
  }
  IdxArray array;
  std::int64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    const std::uint8_t* p = bytes.data() + 4 + 4 * d;
    const std::int64_t dim = (std::int64_t{p[0]} << 24) | (p[1] << 16) | (p[2] << 8) | p[3];
    array.dims.push_back(dim);
    count *= dim;
  }
  const auto have = static_cast<std::int64_t>(bytes.size() - header);
  if (have < count)
    throw Error(path + " is truncated: its header announces " + std::to_string(count) +
                " bytes of data, it holds " + std::to_string(have) +
                " (a damaged download? reinstall the package)");
  if (have > count)
    throw Error(path + " has " + std::to_string(have - count) + " bytes after the " + std::to_string(count) +
                " its header announces");
  array.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return array;
}

}  // namespace gyre::data
