// Runtime's objects: put into this process's node (packed values) or into shared memory
// (Buffers), and read here, mapped from another process of this host, or fetched from the owner.
#include <optional>
#include <span>
#include <utility>

#include "gyre/errors.h"
#include "rt/runtime_impl.h"

namespace gyre::rt {

std::pair<std::uint64_t, std::shared_ptr<void>> Runtime::putBytes(Bytes value) {
  const std::uint64_t id = impl_->nextObjectId();
  return {id, impl_->node_.putObject(id, std::move(value))};
}

ObjectRef<Buffer> Runtime::putBuffer(const void* data, std::size_t size) {
  const std::span<const std::byte> whole(static_cast<const std::byte*>(data), size);
  return putBuffer(std::span<const std::span<const std::byte>>(&whole, 1));
}

ObjectRef<Buffer> Runtime::putBuffer(std::span<const std::span<const std::byte>> parts) {
  const std::uint64_t id = impl_->nextObjectId();
  std::shared_ptr<const detail::Segment> segment = impl_->shared_.put(id, parts);
  std::shared_ptr<void> inNode = impl_->node_.putSegment(id, segment);
  // The owner's last reference: no reader may open the file any more; then the node forgets it.
  std::shared_ptr<void> keep(nullptr, [inNode, segment](void*) { detail::SharedObjects::retire(*segment); });
  return ObjectRef<Buffer>(id, rank(), std::move(keep));
}

Buffer Runtime::get(const ObjectRef<Buffer>& ref, Access access) {
  if (ref.owner() == rank()) {
    std::shared_ptr<const detail::Segment> segment = impl_->node_.segment(ref.id());  // or "freed"
    if (access == Access::kReadOnly) return detail::SharedObjects::view(segment);
    if (std::optional<Buffer> mapped = detail::SharedObjects::open(impl_->shared_.prefix(), ref.id(), access))
      return *std::move(mapped);
    const Buffer view = detail::SharedObjects::view(segment);
    return Buffer::copyOf(view.data(), view.size());
  }
  if (ref.owner() >= 0 && ref.owner() < size()) {
    const detail::SharedPrefixes::Prefix owner = impl_->sharedPrefixes_.of(ref.owner());
    if (owner.here && !owner.prefix.empty()) {
      if (std::optional<Buffer> mapped = detail::SharedObjects::open(owner.prefix, ref.id(), access))
        return *std::move(mapped);
    } else if (!owner.prefix.empty()) {  // another host: one copy fetched for this host's readers
      return detail::SharedObjects::fetchOnce(owner.host, owner.prefix, ref.id(), access,
                                              [&] { return getBytes(ref.id(), ref.owner()); });
    }
  }
  // Freed (the owner says so), or no shared memory.
  const Bytes bytes = getBytes(ref.id(), ref.owner());
  return Buffer::copyOf(bytes.data(), bytes.size());
}

Bytes Runtime::getBytes(std::uint64_t id, int owner) {
  if (owner < 0 || owner >= size())
    throw InvalidArgument("gyre::rt: get() of an ObjectRef whose owner " + std::to_string(owner) +
                          " is not a process of the " + std::to_string(size()));
  if (owner == rank()) return *impl_->node_.object(id);
  auto promise = std::make_shared<detail::Promise>();
  wire::Message m;
  m.type = static_cast<std::uint8_t>(wire::Type::kGetObject);
  m.actor = id;
  impl_->peers_.dispatch(owner, std::move(m), detail::fulfil(promise));
  const std::chrono::milliseconds timeout = impl_->o_.callTimeout;
  if (timeout.count() > 0)
    impl_->deadlines_.watch(promise, timeout, "the object's owner " + std::to_string(owner));
  promise->waitUntil(std::nullopt);
  return promise->value();
}

}  // namespace gyre::rt
