// Scratch: one grow-only buffer per communicator, 64-byte aligned (a cache line, and enough for
// any vector width the reduce kernels use). Algorithms take what they need with a single get()
// per call and carve it, since a larger get() replaces the buffer.
#include "collectives/context.h"

#include <cstdlib>

#include "common/check.h"

namespace gyre::collectives {

namespace {
constexpr std::size_t kAlignment = 64;
}  // namespace

void Scratch::FreeDeleter::operator()(void* p) const {
  std::free(p);
}

void* Scratch::get(std::size_t bytes) {
  if (data_ != nullptr && bytes <= capacity_) return data_.get();
  // aligned_alloc wants a multiple of the alignment; never hand out a null pointer for 0 bytes.
  std::size_t size = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (size == 0) size = kAlignment;
  GYRE_ARG_CHECK(size >= bytes, "scratch size ", bytes, " overflows");
  data_.reset();  // free first: the old contents are not kept, and peak memory stays lower
  capacity_ = 0;
  void* p = std::aligned_alloc(kAlignment, size);
  if (p == nullptr) GYRE_THROW(Error, "out of memory allocating ", size, " bytes of collective scratch");
  data_.reset(p);
  capacity_ = size;
  return p;
}

}  // namespace gyre::collectives
