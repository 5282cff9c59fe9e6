// A value stored once in the process that put it (its owner) and passed by reference:
//
//   gyre::rt::ObjectRef<std::vector<float>> ref = rt.put(weights);
//   rt.task(evaluate).remote(ref);                   // the task reads it with gyre::rt::get(ref)
//   std::vector<float> back = rt.get(ref);           // here, or in any process of the runtime
//
// The owner keeps the value while a copy of the ObjectRef it made lives there; when the last one
// goes, the value is freed, and a get() of it anywhere fails with InvalidArgument ("freed").
// A copy in another process (one passed to a task) borrows: it does not keep the value alive.
#pragma once

#include <cstdint>
#include <memory>

#include "gyre/rt/serialize.h"

namespace gyre::rt {

class Runtime;

// Where rt.put() keeps a value of type T. By default its MessagePack bytes, in the owner's memory;
// a specialization with `static constexpr bool kInSharedMemory = true` and
//   static ObjectRef<Buffer> put(Runtime&, const T&);    // T as bytes in shared memory
//   static T get(Runtime&, const ObjectRef<Buffer>&);     // T over the bytes
// keeps it in shared memory instead, as gyre/rt/tensor.h does for torch::Tensor.
template <class T>
struct SharedValue {
  static constexpr bool kInSharedMemory = false;
};

template <class T>
class ObjectRef {
 public:
  ObjectRef() = default;
  std::uint64_t id() const { return id_; }
  int owner() const { return owner_; }  // the rank of the process that holds the value
  bool valid() const { return id_ != 0; }

  MSGPACK_DEFINE(id_, owner_)

 private:
  friend class Runtime;
  ObjectRef(std::uint64_t id, int owner, std::shared_ptr<void> keep)
      : id_(id), owner_(owner), keep_(std::move(keep)) {}
  std::uint64_t id_ = 0;
  int owner_ = -1;
  std::shared_ptr<void> keep_;  // in the owner: frees the value when the last copy goes
};

}  // namespace gyre::rt
