#include "transport/mpi/mpi_env.h"

#include <cstdint>
#include <cstdlib>

#include "common/check.h"
#include "common/logging.h"
#include "transport/mpi/mpi_transport.h"

namespace gyre::transport::mpi {
namespace {

// Who uses MPI, and whether gyre must finalize it. Guarded by `mutex` (MPI calls made here are
// made with it held, which also serializes initialization and finalization).
struct Registry {
  Mutex mutex;
  std::unique_ptr<Environment> env GYRE_GUARDED_BY(mutex);
  bool ownsMpi GYRE_GUARDED_BY(mutex) = false;  // gyre called MPI_Init_thread, so gyre calls MPI_Finalize
  bool exiting GYRE_GUARDED_BY(mutex) = false;  // the atexit handler ran
  bool finalizedByUs GYRE_GUARDED_BY(mutex) = false;
  bool failed GYRE_GUARDED_BY(mutex) = false;  // a communicator over MPI broke (noteFailure)
  int users GYRE_GUARDED_BY(mutex) = 0;        // live references from acquire()

  static Registry& get() {
    // Never destroyed: a communicator in static storage may be destroyed after every other
    // static object, and releasing it still needs this.
    static Registry* registry = new Registry();
    return *registry;
  }

  void finalizeIfDone() GYRE_REQUIRES(mutex) {
    if (!ownsMpi || finalizedByUs || !exiting || users > 0) return;
    finalizedByUs = true;
    if (Environment::finalized()) return;
    if (failed) {
      log::warn(
          "gyre does not call MPI_Finalize at exit: a communicator over MPI failed, and MPI_Finalize "
          "would wait for every process of the job, including any that is gone");
      return;
    }
    MPI_Finalize();
  }

  static void atExit() {
    Registry& r = get();
    MutexLock lock(r.mutex);
    r.exiting = true;
    r.finalizeIfDone();
  }

  static void release() {
    Registry& r = get();
    MutexLock lock(r.mutex);
    --r.users;
    r.finalizeIfDone();
  }
};

}  // namespace

std::string errorText(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(length));
}

void check(int code, const char* what) {
  if (code != MPI_SUCCESS) GYRE_THROW(Error, what, " failed: ", errorText(code));
}

void Environment::noteFailure() {
  Registry& r = Registry::get();
  MutexLock lock(r.mutex);
  r.failed = true;
}

bool Environment::finalized() {
  int done = 0;
  MPI_Finalized(&done);
  return done != 0;
}

std::unique_lock<Mutex> Environment::lock() {
  return serialized_ ? std::unique_lock<Mutex>(mutex_) : std::unique_lock<Mutex>();
}

std::shared_ptr<Environment> Environment::acquire() {
  Registry& r = Registry::get();
  MutexLock lock(r.mutex);
  if (r.finalizedByUs || finalized())
    GYRE_THROW(Error, "the MPI transport cannot start: MPI has been finalized in this process");
  if (!r.env) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    int provided = MPI_THREAD_SINGLE;
    if (initialized != 0) {
      MPI_Query_thread(&provided);
    } else {
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
      r.ownsMpi = true;
      std::atexit(&Registry::atExit);
    }
    int rank = 0, size = 0, found = 0;
    int* tagUb = nullptr;
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
    check(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tagUb, &found), "MPI_Comm_get_attr(MPI_TAG_UB)");
    const bool serialized = provided < MPI_THREAD_MULTIPLE;
    r.env.reset(new Environment(serialized, rank, size, found != 0 && tagUb != nullptr ? *tagUb : 32767));
    log::info("MPI ", r.ownsMpi ? "initialized by gyre" : "initialized by the program", ": rank ", rank,
              " of ", size,
              serialized ? "; below MPI_THREAD_MULTIPLE, so gyre serializes its MPI calls" : "");
  }
  ++r.users;
  return std::shared_ptr<Environment>(r.env.get(), [](Environment*) { Registry::release(); });
}

void requireAvailable() {}

WorldPlace worldPlace() {
  auto env = Environment::acquire();
  return WorldPlace{env->worldRank(), env->worldSize()};
}

std::string broadcastFromRoot(const std::string& text) {
  constexpr std::uint64_t kLimit = 1 << 20;
  auto env = Environment::acquire();
  auto lock = env->lock();
  const bool root = env->worldRank() == 0;
  GYRE_ARG_CHECK(!root || text.size() <= kLimit, "broadcastFromRoot: ", text.size(), " bytes is too much");
  std::uint64_t bytes = root ? text.size() : 0;
  check(MPI_Bcast(&bytes, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD), "MPI_Bcast");
  if (bytes > kLimit) GYRE_THROW(ProtocolError, "MPI_COMM_WORLD rank 0 broadcast ", bytes, " bytes");
  std::string out = root ? text : std::string(bytes, '\0');
  check(MPI_Bcast(out.data(), static_cast<int>(bytes), MPI_CHAR, 0, MPI_COMM_WORLD), "MPI_Bcast");
  return out;
}

}  // namespace gyre::transport::mpi
