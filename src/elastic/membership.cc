#include "elastic/membership.h"

#include <algorithm>
#include <charconv>

#include "common/check.h"

namespace gyre::elastic {
namespace {

const std::string kEpochKey = "elastic/epoch";
const std::string kFailedKey = "elastic/failed";
const std::string kPlacesKey = "elastic/places";

std::string membersKey(std::int64_t epoch) {
  return "elastic/members/" + std::to_string(epoch);
}

std::string readyKey(int id) {
  return "elastic/ready/" + std::to_string(id);
}

std::string placeKey(int id) {
  return "elastic/place/" + std::to_string(id);
}

// A non-negative decimal integer from text[at, space or end); moves `at` past one space.
std::optional<std::int64_t> takeNumber(const std::string& text, std::size_t& at) {
  const std::size_t end = std::min(text.find(' ', at), text.size());
  std::int64_t value = -1;
  const auto [stop, ec] = std::from_chars(text.data() + at, text.data() + end, value);
  if (ec != std::errc() || stop != text.data() + end || value < 0) return std::nullopt;
  at = std::min(end + 1, text.size());
  return value;
}

}  // namespace

int Membership::rankOf(int id) const {
  const auto it = std::find(members.begin(), members.end(), id);
  return it == members.end() ? -1 : static_cast<int>(it - members.begin());
}

std::string formatMembers(const std::vector<int>& members) {
  std::string text;
  for (const int id : members) {
    if (!text.empty()) text += ',';
    text += std::to_string(id);
  }
  return text;
}

std::vector<int> parseMembers(const std::string& text) {
  std::vector<int> members;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    int id = -1;
    const auto [end, ec] = std::from_chars(text.data() + at, text.data() + comma, id);
    if (ec != std::errc() || end != text.data() + comma || id < 0)
      GYRE_THROW(ProtocolError, "elastic membership '", text, "' is not a list of worker ids");
    members.push_back(id);
    at = comma + 1;
  }
  return members;
}

void publishMembership(Store& store, const Membership& m) {
  GYRE_ARG_CHECK(m.epoch >= 1, "membership epochs start at 1 (got ", m.epoch, ")");
  store.setString(membersKey(m.epoch), formatMembers(m.members));
  store.setString(kEpochKey, std::to_string(m.epoch));
}

std::int64_t latestEpoch(Store& store) {
  if (!store.check({kEpochKey})) return 0;
  const std::string text = store.getString(kEpochKey);
  std::int64_t epoch = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), epoch);
  if (ec != std::errc() || end != text.data() + text.size() || epoch < 1)
    GYRE_THROW(ProtocolError, "elastic epoch '", text, "' is not a positive integer");
  return epoch;
}

std::optional<Membership> latestMembership(Store& store) {
  const std::int64_t epoch = latestEpoch(store);
  if (epoch == 0) return std::nullopt;
  return Membership{epoch, parseMembers(store.getString(membersKey(epoch)))};
}

std::optional<Membership> lastFormedMembership(Store& store) {
  for (std::int64_t epoch = latestEpoch(store); epoch >= 1; --epoch) {
    const std::string key = "elastic/outcome/" + std::to_string(epoch);
    if (store.check({key}) && store.getString(key) == "go")
      return Membership{epoch, parseMembers(store.getString(membersKey(epoch)))};
  }
  return std::nullopt;
}

void announceReady(Store& store, int id, const std::string& host) {
  store.setString(readyKey(id), host);
}

bool isReady(Store& store, int id) {
  return store.check({readyKey(id)});
}

void recordPlace(Store& store, int id, const Place& place) {
  std::string text = place.kind == Place::Kind::kArrived ? "arrived " : "waiting ";
  text += std::to_string(place.epoch) + " " + std::to_string(place.timeoutMs);
  if (place.kind == Place::Kind::kWaiting && !place.reason.empty()) text += " " + place.reason;
  store.setString(placeKey(id), text);
  store.add(kPlacesKey, 1);
}

std::optional<Place> placeOf(Store& store, int id) {
  const std::string key = placeKey(id);
  if (!store.check({key})) return std::nullopt;
  const std::string text = store.getString(key);
  Place place;
  std::size_t at = text.find(' ');
  const std::string kind = text.substr(0, at);
  at = at == std::string::npos ? text.size() : at + 1;
  const std::optional<std::int64_t> epoch = takeNumber(text, at);
  const std::optional<std::int64_t> timeout = epoch ? takeNumber(text, at) : std::nullopt;
  if ((kind != "waiting" && kind != "arrived") || !timeout)
    GYRE_THROW(ProtocolError, "elastic place of worker ", id, " '", text,
               "' is not 'waiting|arrived <epoch> <ms> ...'");
  place.kind = kind == "arrived" ? Place::Kind::kArrived : Place::Kind::kWaiting;
  place.epoch = *epoch;
  place.timeoutMs = *timeout;
  place.reason = text.substr(at);
  return place;
}

std::int64_t placeEvents(Store& store) {
  return store.add(kPlacesKey, 0);
}

void publishFailure(Store& store, const std::string& reason) {
  store.setString(kFailedKey, reason);
}

std::optional<std::string> publishedFailure(Store& store) {
  if (!store.check({kFailedKey})) return std::nullopt;
  return store.getString(kFailedKey);
}

std::vector<int> nextMembers(const std::vector<int>& current, const std::vector<int>& gone,
                             const std::vector<int>& joining, int maxSize) {
  std::vector<int> next;
  for (const int id : current)
    if (std::find(gone.begin(), gone.end(), id) == gone.end()) next.push_back(id);
  std::vector<int> newcomers = joining;
  std::sort(newcomers.begin(), newcomers.end());
  for (const int id : newcomers) {
    if (static_cast<int>(next.size()) >= maxSize) break;
    if (std::find(next.begin(), next.end(), id) == next.end() &&
        std::find(gone.begin(), gone.end(), id) == gone.end())
      next.push_back(id);
  }
  return next;
}

}  // namespace gyre::elastic
