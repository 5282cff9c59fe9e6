// A read-only run of bytes held by reference: what rt.get() of an ObjectRef<Buffer> returns. In
// the process that put it, and in any other process on the same host, it is a view of the
// object's shared memory (no copy; the mapping lives as long as a Buffer of it does, even after the
// object was freed); from another host, a copy fetched over the runtime's connection.
//
//   gyre::rt::ObjectRef<gyre::rt::Buffer> ref = rt.putBuffer(data, size);   // one copy, into shared memory
//   gyre::rt::Buffer b = rt.get(ref);                                        // b.data(), b.size()
//   gyre::rt::Buffer w = rt.get(ref, gyre::rt::Access::kCopyOnWrite);        // w.writableData()
//
// kCopyOnWrite maps the object privately: its pages are shared until one is written, and a write
// changes this Buffer's page only (the object, and every other reader's bytes, stay as they were).
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <span>

namespace gyre::rt {

// How a get() of an ObjectRef<Buffer> maps the bytes.
enum class Access {
  kReadOnly,     // a view: no copy, not writable (writableData() is null)
  kCopyOnWrite,  // a private mapping (or, from another host, a copy): writableData() may be written
};

class Buffer {
 public:
  Buffer() = default;
  // A view of `size` bytes at `data`, kept valid by `keep`; `writable` when this Buffer's own
  // (a copy, or a private mapping) and so may be written through writableData().
  Buffer(std::shared_ptr<const void> keep, const std::byte* data, std::size_t size, bool writable = false)
      : keep_(std::move(keep)), data_(data), size_(size), writable_(writable) {}
  // A Buffer of its own copy of the bytes (writable).
  static Buffer copyOf(const void* data, std::size_t size) {
    std::shared_ptr<std::byte[]> bytes(new std::byte[size > 0 ? size : 1]);
    if (size > 0) std::memcpy(bytes.get(), data, size);
    const std::byte* at = bytes.get();
    return Buffer(std::move(bytes), at, size, true);
  }

  const std::byte* data() const { return data_; }
  // The bytes to write into, when this Buffer is its own (Access::kCopyOnWrite); null otherwise.
  std::byte* writableData() const { return writable_ ? const_cast<std::byte*>(data_) : nullptr; }
  // What keeps the bytes valid: share it to hold them past this Buffer (a tensor over them).
  const std::shared_ptr<const void>& keepAlive() const { return keep_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  std::shared_ptr<const void> keep_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  bool writable_ = false;
};

}  // namespace gyre::rt
