// gyre._C.keep_freed_memory(): what makes a Python training loop as fast as the C++ one.
//
// In a Python process glibc's malloc hands the large buffers a step frees (activations, their
// gradients) back to the kernel, by trimming the top of the heap or unmapping them, and the next
// step page-faults them in again and the kernel zeroes every page. On the cnn at batch 128 that
// costs two thirds of the step (docs/python.md, "Why Python was 3x slower"); the C++ loop's
// allocation pattern happens not to trigger it. Keeping freed memory in the process, with a
// fixed mmap threshold and no trimming, removes the cost; the price is that the process keeps
// its peak heap.
#include "python/malloc.h"

#include <malloc.h>
#include <pybind11/pybind11.h>

namespace gyre::python {

bool keepFreedMemory() {
  // The largest mmap threshold glibc accepts is 32 MiB on 64-bit: allocations above it are rare
  // and large enough to pay for their own mapping.
  const bool mmap = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1;
  const bool trim = mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1;
  return mmap && trim;
}

void bindMalloc(pybind11::module_& m) {
  m.def("keep_freed_memory", &keepFreedMemory,
        "Keeps freed buffers in this process instead of returning them to the kernel at every step "
        "(glibc mallopt: a fixed 32 MiB mmap threshold, no heap trimming). True when glibc took both.");
}

}  // namespace gyre::python
