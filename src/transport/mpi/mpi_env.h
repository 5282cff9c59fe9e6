// MPI's process-wide state as gyre uses it: lazy initialization, the thread level, the mutex
// that serializes gyre's MPI calls below MPI_THREAD_MULTIPLE, and finalization at exit.
//
// This is the one process-wide object in the transport layer, because MPI's own state is
// process-wide: MPI can be initialized and finalized once per process, whatever number of
// communicators use it.
#pragma once

#include <mpi.h>

#include <memory>
#include <mutex>
#include <string>

#include "common/mutex.h"

namespace gyre::transport::mpi {

class Environment {
 public:
  // Initializes MPI on first use, unless the program already did: MPI_Init_thread asking for
  // MPI_THREAD_MULTIPLE (collectives run on the engine's worker thread, and several
  // communicators may be in use at once). The returned reference keeps gyre from finalizing MPI
  // while it is held. If gyre initialized MPI, MPI_Finalize runs at exit, or when the last
  // reference is released after exit began, whichever is later; if the program initialized it,
  // the program finalizes it. Throws Error when MPI was finalized already or fails to start.
  // Thread-safe.
  static std::shared_ptr<Environment> acquire();

  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

  int worldRank() const { return worldRank_; }
  int worldSize() const { return worldSize_; }
  // The largest tag MPI accepts (MPI_TAG_UB; at least 32767).
  int tagUpperBound() const { return tagUpperBound_; }
  // True when MPI gives less than MPI_THREAD_MULTIPLE, so gyre serializes its MPI calls.
  bool serialized() const { return serialized_; }

  // Hold it around every MPI call: it owns the process-wide MPI mutex when MPI gives less than
  // MPI_THREAD_MULTIPLE, and nothing otherwise. (A std::unique_lock, held or not by the thread
  // level: beyond the thread-safety analysis, which is why mutex_ guards no annotated member.)
  std::unique_lock<Mutex> lock();

  // True once MPI_Finalize has run (by gyre or by the program); MPI must not be called then.
  static bool finalized();

  // A communicator over MPI failed (a peer lost, a time-out): some process of the job may be gone,
  // and MPI_Finalize, which waits for every process, could then wait forever (OpenMPI's does). If
  // gyre initialized MPI it then skips MPI_Finalize at exit, and says so; mpirun reports the
  // process as ended without it, which fails a job that has failed anyway. Thread-safe.
  static void noteFailure();

 private:
  Environment(bool serialized, int worldRank, int worldSize, int tagUpperBound)
      : serialized_(serialized),
        worldRank_(worldRank),
        worldSize_(worldSize),
        tagUpperBound_(tagUpperBound) {}

  bool serialized_;
  int worldRank_;
  int worldSize_;
  int tagUpperBound_;
  Mutex mutex_;  // serializes gyre's MPI calls (MPI's own state), when serialized_
};

// MPI's text for an error code.
std::string errorText(int code);
// Throws Error "<what> failed: <MPI's text>" unless code is MPI_SUCCESS.
void check(int code, const char* what);

}  // namespace gyre::transport::mpi
