#include "transport/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <new>
#include <utility>

#include "common/check.h"
#include "common/socket.h"
#include "transport/shm/futex.h"

namespace gyre::transport::shm {
namespace {

std::size_t ringStride(std::size_t ringBytes) { return sizeof(RingHeader) + ringBytes; }

}  // namespace

std::size_t Segment::totalBytes(std::uint32_t numRings, std::size_t ringBytes) {
  return sizeof(SegmentHeader) + numRings * ringStride(ringBytes);
}

Segment Segment::create(const std::string& name, std::uint32_t numRings, std::size_t ringBytes) {
  GYRE_ARG_CHECK(ringBytes % kCacheLine == 0 && ringBytes >= 4096, "shared-memory ring size ", ringBytes,
                 " must be a multiple of 64 and at least 4096");
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) net::throwErrno("shm_open(" + name + ")");
  net::Fd guard(fd);
  Segment s;
  s.name_ = name;
  s.owner_ = true;
  s.size_ = totalBytes(numRings, ringBytes);
  if (ftruncate(fd, static_cast<off_t>(s.size_)) != 0) {
    shm_unlink(name.c_str());
    net::throwErrno("ftruncate of shared memory " + name + " (is /dev/shm full?)");
  }
  // Prefaulted: the first pass through a ring must not pay a page fault per 4 KiB.
  s.base_ = mmap(nullptr, s.size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (s.base_ == MAP_FAILED) {
    s.base_ = nullptr;
    shm_unlink(name.c_str());
    net::throwErrno("mmap of shared memory " + name);
  }
  auto* h = new (s.base_) SegmentHeader;
  h->magic = kSegmentMagic;
  h->numRings = numRings;
  h->ringBytes = ringBytes;
  h->doorbell.store(0);
  h->sleeping.store(0);
  for (std::uint32_t i = 0; i < numRings; ++i) {
    auto* r = new (s.ring(i)) RingHeader;
    r->head.store(0);
    r->tail.store(0);
  }
  return s;
}

Segment Segment::open(const std::string& name) {
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) net::throwErrno("shm_open(" + name + ") of a peer's segment");
  net::Fd guard(fd);
  struct stat st {};
  if (fstat(fd, &st) != 0) net::throwErrno("fstat(" + name + ")");
  if (static_cast<std::size_t>(st.st_size) < sizeof(SegmentHeader))
    GYRE_THROW(ProtocolError, "shared memory segment ", name, " is too small (", st.st_size, " bytes)");
  Segment s;
  s.name_ = name;
  s.size_ = static_cast<std::size_t>(st.st_size);
  s.base_ = mmap(nullptr, s.size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (s.base_ == MAP_FAILED) {
    s.base_ = nullptr;
    net::throwErrno("mmap of shared memory " + name);
  }
  const SegmentHeader* h = s.header();
  if (h->magic != kSegmentMagic || totalBytes(h->numRings, h->ringBytes) != s.size_)
    GYRE_THROW(ProtocolError, "shared memory segment ", name, " has a bad header");
  return s;
}

Segment::Segment(Segment&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      name_(std::move(other.name_)),
      owner_(std::exchange(other.owner_, false)) {}

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    this->~Segment();
    new (this) Segment(std::move(other));
  }
  return *this;
}

Segment::~Segment() {
  unlink();
  if (base_ != nullptr) munmap(base_, size_);
}

void Segment::unlink() {
  if (owner_) {
    shm_unlink(name_.c_str());
    owner_ = false;
  }
}

RingHeader* Segment::ring(std::uint32_t index) const {
  auto* first = static_cast<std::uint8_t*>(base_) + sizeof(SegmentHeader);
  return reinterpret_cast<RingHeader*>(first + index * ringStride(header()->ringBytes));
}

std::uint8_t* Segment::ringData(std::uint32_t index) const {
  return reinterpret_cast<std::uint8_t*>(ring(index)) + sizeof(RingHeader);
}

// The owner raises `sleeping`, then re-reads head/tail before it sleeps; the peer publishes
// head/tail, then reads `sleeping`. All four are seq_cst, so in their single total order either
// the peer sees the flag (and rings) or the owner sees the new head/tail (and does not sleep).
void Segment::notifyOwner() const {
  SegmentHeader* h = header();
  if (h->sleeping.load(std::memory_order_seq_cst) != 0) {
    h->doorbell.fetch_add(1, std::memory_order_seq_cst);
    futexWakeAll(&h->doorbell);
  }
}

}  // namespace gyre::transport::shm
