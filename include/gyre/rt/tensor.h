// libtorch tensors in gyre::rt (this header needs libtorch; the rest of gyre::rt does not).
//
// As values: a torch::Tensor is an argument, a result or a put() value like any other, packed as
// MessagePack [dtype, sizes, bytes] (a CPU copy of it, contiguous):
//
//   torch::Tensor scale(torch::Tensor t, double by) { return t * by; }
//   GYRE_RT_FUNCTION(scale);
//   torch::Tensor y = rt.task(scale).remote(torch::ones({3}), 2.0).get();
//
// As objects: rt.put(tensor) copies it once into shared memory (as putBuffer), and rt.get(ref)
// returns a tensor over the mapping: in the process that put it and in every other process on
// the host, without a copy; from another host, fetched once for the host. The tensor is
// copy-on-write: writing into it changes only the pages written, and only for this reader.
//
//   gyre::rt::ObjectRef<torch::Tensor> ref = rt.put(weights);
//   rt.task(evaluate).remote(ref);   // evaluate(ObjectRef<torch::Tensor> r) reads gyre::rt::get(r)
#pragma once

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "gyre/errors.h"
#include "gyre/rt/runtime.h"

namespace gyre::rt {

namespace detail {

// The dtypes a tensor may have on the wire, by the names they travel under.
inline const std::array<std::pair<const char*, c10::ScalarType>, 10>& tensorDtypes() {
  static const std::array<std::pair<const char*, c10::ScalarType>, 10> kDtypes{{
      {"float32", ::torch::kFloat32},
      {"float64", ::torch::kFloat64},
      {"float16", ::torch::kFloat16},
      {"bfloat16", ::torch::kBFloat16},
      {"int64", ::torch::kInt64},
      {"int32", ::torch::kInt32},
      {"int16", ::torch::kInt16},
      {"int8", ::torch::kInt8},
      {"uint8", ::torch::kUInt8},
      {"bool", ::torch::kBool},
  }};
  return kDtypes;
}

inline std::string tensorDtypeName(c10::ScalarType type) {
  for (const auto& [name, t] : tensorDtypes())
    if (t == type) return name;
  throw InvalidArgument(std::string("gyre::rt: a tensor of dtype ") + c10::toString(type) +
                        " cannot be sent (float32/64, float16, bfloat16, int8/16/32/64, uint8, bool can)");
}

inline c10::ScalarType tensorDtype(const std::string& name) {
  for (const auto& [n, t] : tensorDtypes())
    if (name == n) return t;
  throw InvalidArgument("gyre::rt: a tensor of unknown dtype '" + name + "'");
}

// The bytes `sizes` of `type` take; InvalidArgument for a negative size or an overflow.
inline std::size_t tensorBytes(const std::vector<std::int64_t>& sizes, c10::ScalarType type) {
  const std::size_t element = c10::elementSize(type);
  const std::size_t most = (std::size_t{1} << 62) / element;  // elements, so that the bytes fit too
  std::size_t count = 1;
  for (const std::int64_t s : sizes) {
    if (s < 0) throw InvalidArgument("gyre::rt: a tensor with a negative size");
    if (s != 0 && count > most / static_cast<std::size_t>(s))
      throw InvalidArgument("gyre::rt: a tensor's sizes overflow");
    count *= static_cast<std::size_t>(s);
  }
  return count * element;
}

// A CPU, contiguous tensor with the data of `t` (itself when it already is one).
inline ::torch::Tensor sendable(const ::torch::Tensor& t) {
  if (!t.defined()) throw InvalidArgument("gyre::rt: an undefined tensor cannot be sent");
  return t.device().is_cpu() ? t.contiguous() : t.to(::torch::kCPU).contiguous();
}

// The header of a tensor in shared memory, before its bytes (which start 64-byte aligned).
struct TensorHeader {
  static constexpr std::uint64_t kMagic = 0x524f534e45544752;  // "GRTENSOR"
  static constexpr int kMaxDims = 16;
  std::uint64_t magic = kMagic;
  char dtype[16] = {};
  std::int64_t dims = 0;
  std::int64_t sizes[kMaxDims] = {};
  std::byte pad[32] = {};
};
static_assert(sizeof(TensorHeader) % 64 == 0);

}  // namespace detail

}  // namespace gyre::rt

// rt.put(tensor) keeps the tensor in shared memory (object_ref.h's SharedValue): its bytes copied
// once, after a 64-byte-aligned header; rt.get(ref) (or gyre::rt::get(ref) in a task) returns a
// tensor over a copy-on-write mapping of them (see above). InvalidArgument when it was freed.
template <>
struct gyre::rt::SharedValue<at::Tensor> {
  static constexpr bool kInSharedMemory = true;

  static ObjectRef<Buffer> put(Runtime& rt, const at::Tensor& t) {
    const ::torch::Tensor c = detail::sendable(t);
    if (c.dim() > detail::TensorHeader::kMaxDims)
      throw InvalidArgument("gyre::rt: put() takes tensors of at most 16 dimensions, this one has " +
                            std::to_string(c.dim()));
    detail::TensorHeader header;
    const std::string dtype = detail::tensorDtypeName(c.scalar_type());
    std::memcpy(header.dtype, dtype.data(), dtype.size());
    header.dims = c.dim();
    for (std::int64_t d = 0; d < c.dim(); ++d) header.sizes[d] = c.size(d);
    const std::array<std::span<const std::byte>, 2> parts{
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(&header), sizeof header),
        std::span<const std::byte>(static_cast<const std::byte*>(c.data_ptr()), c.nbytes())};
    return rt.putBuffer(parts);
  }

  static at::Tensor get(Runtime& rt, const ObjectRef<Buffer>& ref) {
    const Buffer b = rt.get(ref, Access::kCopyOnWrite);
    detail::TensorHeader header;
    if (b.size() < sizeof header)
      throw InvalidArgument("gyre::rt: get() of a tensor from an object that is not one");
    std::memcpy(&header, b.data(), sizeof header);
    if (header.magic != detail::TensorHeader::kMagic || header.dims < 0 ||
        header.dims > detail::TensorHeader::kMaxDims)
      throw InvalidArgument("gyre::rt: get() of a tensor from an object that is not one");
    const c10::ScalarType type =
        detail::tensorDtype(std::string(header.dtype, strnlen(header.dtype, sizeof header.dtype)));
    const std::vector<std::int64_t> sizes(header.sizes, header.sizes + header.dims);
    if (detail::tensorBytes(sizes, type) != b.size() - sizeof header)
      throw InvalidArgument("gyre::rt: get() of a tensor: the object's bytes do not match its sizes");
    std::shared_ptr<const void> keep = b.keepAlive();
    return ::torch::from_blob(
        b.writableData() + sizeof header, sizes, [keep](void*) mutable { keep.reset(); },
        ::torch::TensorOptions().dtype(type));
  }
};

// ::torch::Tensor as a MessagePack value: [dtype name, [sizes...], bin of its bytes].
namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
  namespace adaptor {

  template <>
  struct pack<at::Tensor> {
    template <class Stream>
    packer<Stream>& operator()(packer<Stream>& o, const at::Tensor& t) const {
      const at::Tensor c = gyre::rt::detail::sendable(t);
      if (c.nbytes() > 0xffffffffu)
        throw gyre::InvalidArgument(
            "gyre::rt: a tensor of " + std::to_string(c.nbytes()) +
            " bytes is too large to pass by value (4 GiB at most): rt.put() it and pass the ObjectRef");
      o.pack_array(3);
      o.pack(gyre::rt::detail::tensorDtypeName(c.scalar_type()));
      o.pack(std::vector<std::int64_t>(c.sizes().begin(), c.sizes().end()));
      o.pack_bin(static_cast<std::uint32_t>(c.nbytes()));
      o.pack_bin_body(static_cast<const char*>(c.data_ptr()), static_cast<std::uint32_t>(c.nbytes()));
      return o;
    }
  };

  template <>
  struct convert<at::Tensor> {
    const msgpack::object& operator()(const msgpack::object& o, at::Tensor& t) const {
      if (o.type != msgpack::type::ARRAY || o.via.array.size != 3 ||
          o.via.array.ptr[2].type != msgpack::type::BIN)
        throw msgpack::type_error();
      const auto type = gyre::rt::detail::tensorDtype(o.via.array.ptr[0].as<std::string>());
      const auto sizes = o.via.array.ptr[1].as<std::vector<std::int64_t>>();
      const msgpack::object_bin& bin = o.via.array.ptr[2].via.bin;
      if (gyre::rt::detail::tensorBytes(sizes, type) != bin.size)
        throw gyre::InvalidArgument("gyre::rt: a tensor's bytes (" + std::to_string(bin.size) +
                                    ") do not match its sizes and dtype");
      t = ::torch::empty(sizes, ::torch::TensorOptions().dtype(type));
      if (bin.size > 0) std::memcpy(t.data_ptr(), bin.ptr, bin.size);
      return o;
    }
  };

  }  // namespace adaptor
}
}  // namespace msgpack
