// Communicator::allocateShared: rank 0 creates a POSIX shared-memory object, every rank maps it,
// and rank 0 unlinks the name once all have, so nothing outlives the ranks in /dev/shm.
#include "gyre/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <random>
#include <string>

#include "api/communicator_impl.h"
#include "gyre/communicator.h"

namespace gyre {
namespace {

constexpr std::size_t kNameBytes = 64;

std::string uniqueName() {
  static std::atomic<unsigned> counter{0};
  std::random_device random;
  return "/gyre-shared-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
         std::to_string(random());
}

// Maps the object `name` (creating it with `bytes` when `create`); null on any failure.
void* mapShared(const std::string& name, std::size_t bytes, bool create) {
  const int flags = O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0);
  const int fd = ::shm_open(name.c_str(), flags, 0600);
  if (fd < 0) return nullptr;
  void* base = MAP_FAILED;
  if (!create || ::ftruncate(fd, static_cast<off_t>(bytes)) == 0)
    base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) {
    if (create) ::shm_unlink(name.c_str());
    return nullptr;
  }
  return base;
}

}  // namespace

SharedMemory::~SharedMemory() {
  ::munmap(base_, bytes_);
}

bool Communicator::Impl::allPeersShareMemory() const {
  for (int peer = 0; peer < size_; ++peer)
    if (peer != rank_ && mesh_->transportTo(peer) != Transport::kShm) return false;
  return true;
}

std::shared_ptr<SharedMemory> Communicator::allocateShared(std::size_t bytes) {
  const std::size_t mapped = bytes > 0 ? bytes : 1;
  // Every rank must agree: a rank whose peers are not all local says no for everyone.
  std::int32_t ok = impl_->allPeersShareMemory() ? 1 : 0;
  allreduce(&ok, &ok, 1, {DataType::kInt32, ReduceOp::kMin});
  if (!ok) return nullptr;
  std::array<char, kNameBytes> name{};  // empty: rank 0 could not create it
  void* base = nullptr;
  if (rank() == 0) {
    const std::string created = uniqueName();
    base = mapShared(created, mapped, true);
    if (base) std::strncpy(name.data(), created.c_str(), kNameBytes - 1);
  }
  BroadcastOptions b;
  b.dtype = DataType::kUInt8;
  broadcast(name.data(), name.size(), b);
  if (name[0] == '\0') return nullptr;
  if (rank() != 0) base = mapShared(name.data(), mapped, false);
  ok = base ? 1 : 0;
  allreduce(&ok, &ok, 1, {DataType::kInt32, ReduceOp::kMin});  // every rank has mapped it (or failed)
  if (rank() == 0) ::shm_unlink(name.data());
  if (!ok) {
    if (base) ::munmap(base, mapped);
    return nullptr;
  }
  return std::make_shared<SharedMemory>(base, mapped);
}

}  // namespace gyre
