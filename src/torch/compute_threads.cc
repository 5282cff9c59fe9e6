#include "torch/compute_threads.h"

#include <dlfcn.h>
#include <torch/torch.h>

namespace gyre::torch {

void setComputeThreads(int threads) {
  ::torch::set_num_threads(threads);
  // Looked up, not linked: a libtorch over another BLAS has no such function.
  using SetThreads = void (*)(int);
  if (auto* set = reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
    set(threads);
}

}  // namespace gyre::torch
