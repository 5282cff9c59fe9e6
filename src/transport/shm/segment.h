// A rank's shared-memory segment: its doorbell and one inbound ring per local peer.
//
// Layout (every field on its own cache line where two processes write):
//   SegmentHeader | RingHeader[0] data[0] | RingHeader[1] data[1] | ...
// Ring i carries bytes from the i-th local peer (in rank order) to the segment's owner.
// The owner creates the segment, its peers open it by name, and the owner unlinks the name once
// every peer has mapped it, so a crash later leaves nothing behind in /dev/shm.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace gyre::transport::shm {

inline constexpr std::size_t kCacheLine = 64;
inline constexpr std::uint32_t kSegmentMagic = 0x47595245;  // "GYRE"

struct alignas(kCacheLine) SegmentHeader {
  std::uint32_t magic;
  std::uint32_t numRings;
  std::uint64_t ringBytes;
  // Bumped by any peer that changed something the owner may be waiting for.
  alignas(kCacheLine) std::atomic<std::uint32_t> doorbell;
  // Non-zero while the owner sleeps (or is about to) on the doorbell.
  alignas(kCacheLine) std::atomic<std::uint32_t> sleeping;
};

struct alignas(kCacheLine) RingHeader {
  alignas(kCacheLine) std::atomic<std::uint64_t> head;  // bytes ever written (writer only)
  alignas(kCacheLine) std::atomic<std::uint64_t> tail;  // bytes ever consumed (reader only)
};

// Owns one mapping of a segment.
class Segment {
 public:
  // Creates and maps a new segment named `name` ("/gyre-..."), with numRings rings of ringBytes.
  static Segment create(const std::string& name, std::uint32_t numRings, std::size_t ringBytes);
  // Maps an existing segment; checks its magic and size.
  static Segment open(const std::string& name);

  Segment() = default;
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();

  // Removes the name; existing mappings stay valid. Idempotent.
  void unlink();

  SegmentHeader* header() const { return static_cast<SegmentHeader*>(base_); }
  RingHeader* ring(std::uint32_t index) const;
  std::uint8_t* ringData(std::uint32_t index) const;
  std::size_t ringBytes() const { return header()->ringBytes; }
  const std::string& name() const { return name_; }

  // Rings the owner's doorbell if it may be sleeping. Call after publishing head or tail.
  void notifyOwner() const;

  static std::size_t totalBytes(std::uint32_t numRings, std::size_t ringBytes);

 private:
  void* base_ = nullptr;
  std::size_t size_ = 0;
  std::string name_;
  bool owner_ = false;
};

}  // namespace gyre::transport::shm
