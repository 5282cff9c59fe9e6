// How many threads a process's tensor maths uses, all of it: torch's own (intra-op, OpenMP, MKL)
// and the BLAS it calls. Debian's libtorch calls OpenBLAS, which starts its own threads (one per
// core) and ignores torch::set_num_threads; its thread count changes a matrix product's last
// bits, so "one thread" holds only with both set (as OPENBLAS_NUM_THREADS=1 under gyre run).
#pragma once

namespace gyre::torch {

// torch::set_num_threads(threads), and OpenBLAS's when the process has it. threads >= 1.
void setComputeThreads(int threads);

}  // namespace gyre::torch
