// Objects in shared memory (rt.putBuffer): each lives in a file of /dev/shm, written once by the
// process that put it (its owner) and mapped read-only, without a copy, by readers in the same
// process or on the same host. A file is named gyre-rt-<pid>-<runtime>-<object id>, so a reader
// that knows the owner's prefix (published in the job's store) opens it by name.
//
// Freed objects' files are kept, mapped and warm, in a small pool and reused for the next put of
// a similar size: writing into fresh pages costs a page fault each, which dominates a put of
// 100 MB. A reader holds a shared flock on the file while its Buffer lives; the owner reuses a file
// only under an exclusive flock, so a reader's bytes never change, and a reader that opened a file
// being reused finds another object id in its header and is told the object is gone. Files of
// owners that died are removed by the next runtime that starts on the host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "gyre/rt/buffer.h"

namespace gyre::rt::detail {

class Segment;
struct SegmentPool;

class SharedObjects {
 public:
  SharedObjects();   // this runtime's prefix; removes the files of dead owners
  ~SharedObjects();  // removes this runtime's pooled files; live segments go with their last reference
  SharedObjects(const SharedObjects&) = delete;
  SharedObjects& operator=(const SharedObjects&) = delete;

  const std::string& prefix() const;  // "gyre-rt-<pid>-<n>"
  // A new object: the bytes of `parts`, one after the other, copied into shared memory. The
  // segment goes back to the pool when the last reference to it (the owner's, or a Buffer in this
  // process) goes.
  std::shared_ptr<const Segment> put(std::uint64_t id, std::span<const std::span<const std::byte>> parts);
  // The object was freed: its file is renamed, so that no reader opens it any more (Buffers that
  // map it, here or elsewhere, keep reading it).
  static void retire(const Segment& s);
  // A view of a segment of this process, and a copy of its bytes (for a reader on another host).
  static Buffer view(const std::shared_ptr<const Segment>& s);
  static std::string copy(const Segment& s);
  // Object `id` of the owner whose prefix is `ownerPrefix`, mapped read-only (or privately, copy
  // on write); nullopt when there is no such file here (freed, or the owner is on another host).
  static std::optional<Buffer> open(const std::string& ownerPrefix, std::uint64_t id,
                                    Access access = Access::kReadOnly);
  // Object `id` of an owner on another host (its hostKey() `ownerHost`), fetched once per host: the first reader here calls
  // `fetch` (its bytes) and writes them into a file of this host, which the others (those that
  // come while a reader still maps it) map instead of fetching again; the last reader here to let
  // it go removes it. A private copy when /dev/shm has no room. Throws what `fetch` throws.
  static Buffer fetchOnce(const std::string& ownerHost, const std::string& ownerPrefix, std::uint64_t id,
                          Access access, const std::function<std::string()>& fetch);
  // This host as the runtime's processes see it (the machine and its network namespace): two
  // processes map each other's files only when their keys match.
  static const std::string& hostKey();

 private:
  std::shared_ptr<SegmentPool> pool_;
};

}  // namespace gyre::rt::detail
