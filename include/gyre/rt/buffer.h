// A read-only run of bytes held by reference: what rt.get() of an ObjectRef<Buffer> returns. In
// the process that put it, and in any other process on the same host, it is a view of the
// object's shared memory (no copy; the mapping lives as long as a Buffer of it does, even after the
// object was freed); from another host, a copy fetched over the runtime's connection.
//
//   gyre::rt::ObjectRef<gyre::rt::Buffer> ref = rt.putBuffer(data, size);   // one copy, into shared memory
//   gyre::rt::Buffer b = rt.get(ref);                                        // b.data(), b.size()
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <span>

namespace gyre::rt {

class Buffer {
 public:
  Buffer() = default;
  // A view of `size` bytes at `data`, kept valid by `keep`.
  Buffer(std::shared_ptr<const void> keep, const std::byte* data, std::size_t size)
      : keep_(std::move(keep)), data_(data), size_(size) {}
  // A Buffer of its own copy of the bytes.
  static Buffer copyOf(const void* data, std::size_t size) {
    std::shared_ptr<std::byte[]> bytes(new std::byte[size > 0 ? size : 1]);
    if (size > 0) std::memcpy(bytes.get(), data, size);
    const std::byte* at = bytes.get();
    return Buffer(std::move(bytes), at, size);
  }

  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  std::shared_ptr<const void> keep_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace gyre::rt
