#include "rendezvous/tcp_store_service.h"

#include <algorithm>

#include "gyre/errors.h"

namespace gyre::rendezvous {
namespace {

// Longest a get/wait may park (a client asking for more is capped).
constexpr std::int64_t kMaxWaitMs = 24LL * 3600 * 1000;

}  // namespace

std::optional<Response> StoreService::serve(std::uint64_t client, Request request) {
  Response response;
  try {
    const std::string& key = request.keys.empty() ? std::string() : request.keys[0];
    switch (request.command) {
      case Command::kSet:
        table_.set(key, std::move(request.value));
        changed_ = true;
        break;
      case Command::kAdd:
        response.number = table_.add(key, request.number);
        changed_ = true;
        break;
      case Command::kCompareSet:
        response.value = table_.compareSet(key, request.expected, request.value);
        changed_ = true;
        break;
      case Command::kDelete:
        response.flag = table_.erase(key);
        break;
      case Command::kCheck:
        response.flag = table_.containsAll(request.keys);
        break;
      case Command::kGet:
      case Command::kWait:
        if (!table_.containsAll(request.keys)) {
          const auto ms = std::clamp<std::int64_t>(request.number, 0, kMaxWaitMs);
          waiters_.push_back({client, std::move(request), Clock::now() + std::chrono::milliseconds(ms)});
          return std::nullopt;
        }
        if (request.command == Command::kGet) response.value = *table_.find(key);
        break;
    }
  } catch (const InvalidArgument& e) {
    response.status = Status::kInvalidArgument;
    response.message = e.what();
  }
  return response;
}

std::vector<StoreService::Answer> StoreService::takeReady() {
  std::vector<Answer> ready;
  if (!changed_) return ready;
  changed_ = false;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (!table_.containsAll(it->request.keys)) {
      ++it;
      continue;
    }
    Response response;
    if (it->request.command == Command::kGet) response.value = *table_.find(it->request.keys[0]);
    ready.push_back({it->client, std::move(response)});
    it = waiters_.erase(it);
  }
  return ready;
}

std::vector<StoreService::Answer> StoreService::expire(Clock::time_point now) {
  std::vector<Answer> expired;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->deadline > now) {
      ++it;
      continue;
    }
    Response response;
    response.status = Status::kTimeout;
    response.message = name_ + " " + std::string(toString(it->request.command)) + " timed out after " +
                       std::to_string(it->request.number) + " ms; missing " +
                       describeKeys(table_.missing(it->request.keys));
    expired.push_back({it->client, std::move(response)});
    it = waiters_.erase(it);
  }
  return expired;
}

std::optional<Clock::time_point> StoreService::nextDeadline() const {
  std::optional<Clock::time_point> next;
  for (const auto& w : waiters_)
    if (!next || w.deadline < *next) next = w.deadline;
  return next;
}

void StoreService::forget(std::uint64_t client) {
  std::erase_if(waiters_, [client](const Waiter& w) { return w.client == client; });
}

}  // namespace gyre::rendezvous
