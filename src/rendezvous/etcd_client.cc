#include "rendezvous/etcd_client.h"

#include <httplib.h>
#include <openssl/evp.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "common/check.h"
#include "common/clock.h"
#include "common/socket.h"

namespace gyre::rendezvous {
namespace {

using nlohmann::json;

std::string base64(const std::string& raw) {
  std::string out(4 * ((raw.size() + 2) / 3), '\0');
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(raw.data()), static_cast<int>(raw.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::string base64(const EtcdClient::Bytes& raw) {
  return base64(std::string(raw.begin(), raw.end()));
}

std::string unbase64(const std::string& text) {
  if (text.empty()) return {};
  GYRE_ENFORCE(text.size() % 4 == 0, "etcd sent a malformed base64 value");
  std::string out(3 * text.size() / 4, '\0');
  const int n =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  GYRE_ENFORCE(n >= 0, "etcd sent a malformed base64 value");
  // EVP_DecodeBlock counts the padding's zero bytes.
  const std::size_t pad = std::count(text.end() - 2, text.end(), '=');
  out.resize(static_cast<std::size_t>(n) - pad);
  return out;
}

// The gateway writes 64-bit integers as strings and leaves out fields that hold their zero value.
std::int64_t integer(const json& j, const char* field) {
  const auto it = j.find(field);
  if (it == j.end()) return 0;
  return it->is_string() ? std::stoll(it->get<std::string>()) : it->get<std::int64_t>();
}

EtcdKeyValue keyValue(const json& kv) {
  EtcdKeyValue out;
  out.key = unbase64(kv.value("key", ""));
  const std::string value = unbase64(kv.value("value", ""));
  out.value.assign(value.begin(), value.end());
  out.modRevision = integer(kv, "mod_revision");
  out.lease = integer(kv, "lease");
  return out;
}

// The end of the range of keys that start with `prefix`: the prefix with its last byte raised.
std::string prefixEnd(std::string prefix) {
  while (!prefix.empty() && static_cast<unsigned char>(prefix.back()) == 0xff) prefix.pop_back();
  if (prefix.empty()) return std::string(1, '\0');  // every key
  prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
  return prefix;
}

json putRequest(const std::string& key, const EtcdClient::Bytes& value, std::int64_t lease) {
  json put = {{"key", base64(key)}, {"value", base64(value)}};
  if (lease != 0) put["lease"] = std::to_string(lease);
  return put;
}

// What went wrong with an HTTP request that got no answer, in words.
std::string describe(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection:
      return "cannot connect (nothing listens there, or no route)";
    case httplib::Error::ConnectionTimeout:
      return "no answer to the connection within 1 s";
    case httplib::Error::Read:
      return "the connection broke (or timed out) before the answer";
    case httplib::Error::Write:
      return "the connection broke while sending";
    default:
      return "HTTP request failed (" + httplib::to_string(e) + ")";
  }
}

bool retryable(int status, const json& error) {
  // gRPC codes: 14 unavailable (no leader, member stopping), 4 deadline exceeded.
  const std::int64_t code = error.is_object() ? error.value("code", 0) : 0;
  return status >= 500 || code == 14 || code == 4;
}

}  // namespace

EtcdUrl parseEtcdUrl(const std::string& url) {
  const std::string scheme = "etcd://";
  GYRE_ARG_CHECK(url.starts_with(scheme), "an etcd address starts with etcd:// (got '", url, "')");
  const std::string rest = url.substr(scheme.size());
  const std::size_t slash = rest.find('/');
  const std::string hosts = rest.substr(0, slash);
  EtcdUrl out;
  std::size_t begin = 0;
  while (begin <= hosts.size()) {
    const std::size_t comma = std::min(hosts.find(',', begin), hosts.size());
    const std::string endpoint = hosts.substr(begin, comma - begin);
    GYRE_ARG_CHECK(!endpoint.empty(), "'", url, "' has an empty endpoint (etcd://host:port[,host:port...])");
    net::splitHostPort(endpoint);  // throws InvalidArgument naming it when it is not host:port
    out.endpoints.push_back(endpoint);
    begin = comma + 1;
  }
  std::string path = slash == std::string::npos ? std::string() : rest.substr(slash + 1);
  while (!path.empty() && path.back() == '/') path.pop_back();
  out.hasPath = !path.empty();
  if (path.empty()) path = "gyre";
  out.prefix.append("/").append(path).append("/");
  return out;
}

std::string formatEtcdUrl(const EtcdUrl& url) {
  std::string out = "etcd://";
  for (std::size_t i = 0; i < url.endpoints.size(); ++i) out.append(i ? "," : "").append(url.endpoints[i]);
  std::string path = url.prefix;
  while (!path.empty() && path.back() == '/') path.pop_back();
  return out + path;
}

EtcdClient::EtcdClient(std::vector<std::string> endpoints, std::chrono::milliseconds timeout)
    : endpoints_(std::move(endpoints)), timeout_(timeout) {
  GYRE_ARG_CHECK(!endpoints_.empty(), "an etcd client needs at least one endpoint");
  for (const std::string& e : endpoints_) {
    const auto [host, port] = net::splitHostPort(e);
    auto client = std::make_unique<httplib::Client>(host, port);
    client->set_keep_alive(true);
    client->set_tcp_nodelay(true);  // else each small request waits out a delayed ACK (40 ms)
    client->set_connection_timeout(std::chrono::seconds(1));
    // A member whose host vanished (no reset) costs at most this before the next one is tried;
    // etcd answers a healthy request in milliseconds, and a slow proposal times out on its own.
    client->set_read_timeout(std::chrono::seconds(2));
    client->set_write_timeout(std::chrono::seconds(5));
    clients_.push_back(std::move(client));
  }
  // Clients start at different members, so that one member lost does not stall them all.
  {
    MutexLock lock(mutex_);
    current_ = std::random_device()() % endpoints_.size();
  }
  // A first call proves a member answers, and picks it.
  call("/v3/maintenance/status", "{}");
  MutexLock lock(mutex_);
  const auto [host, port] = net::splitHostPort(endpoints_[current_]);
  const net::Fd fd = net::connectTo(host, port, Deadline::after(std::chrono::seconds(1)));
  localAddress_ = net::localHost(fd.get());
}

EtcdClient::~EtcdClient() = default;

std::string EtcdClient::callOnce(std::size_t endpoint, const std::string& path, const std::string& body,
                                 std::string& why) {
  httplib::Result r = clients_[endpoint]->Post(path, body, "application/json");
  if (!r) {
    why = endpoints_[endpoint] + ": " + describe(r.error());
    return {};
  }
  if (r->status == 200) return r->body;
  const json error = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  const std::string message = error.is_object() && error.contains("message")
                                  ? error["message"].get<std::string>()
                                  : "HTTP " + std::to_string(r->status) + " " + r->body.substr(0, 200);
  if (retryable(r->status, error)) {
    why = endpoints_[endpoint] + ": " + message;
    return {};
  }
  const std::int64_t code = error.is_object() ? error.value("code", 0) : 0;
  if (code == 3 || code == 8 || code == 11)  // invalid argument, resource exhausted, out of range
    GYRE_THROW(InvalidArgument, "etcd at ", endpoints_[endpoint], " refused ", path, ": ", message);
  GYRE_THROW(Error, "etcd at ", endpoints_[endpoint], " failed ", path, ": ", message);
}

std::string EtcdClient::call(const std::string& path, const std::string& body) {
  return call(path, body, Deadline::after(timeout_));
}

std::string EtcdClient::call(const std::string& path, const std::string& body, const Deadline& callDeadline) {
  MutexLock lock(mutex_);
  const Clock::time_point started = Clock::now();
  const Deadline deadline(std::min(callDeadline.at(), started + timeout_));
  std::vector<std::string> whys(endpoints_.size());
  auto pause = std::chrono::milliseconds(10);
  while (true) {
    for (std::size_t tried = 0; tried < endpoints_.size(); ++tried) {
      const std::size_t e = (current_ + tried) % endpoints_.size();
      std::string why;
      std::string reply = callOnce(e, path, body, why);
      if (why.empty()) {
        current_ = e;
        return reply;
      }
      whys[e] = why;
      if (deadline.expired()) break;
    }
    if (deadline.expired()) break;
    std::this_thread::sleep_for(
        std::min<std::chrono::milliseconds>(pause, std::chrono::milliseconds(deadline.remainingMs())));
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
  std::string all;
  for (const std::string& w : whys) all.append(all.empty() ? "" : "; ").append(w);
  GYRE_THROW(Error, "cannot reach etcd within ",
             std::chrono::ceil<std::chrono::milliseconds>(deadline.at() - started).count(), " ms (",
             all, ")");
}

void EtcdClient::put(const std::string& key, const Bytes& value, std::int64_t lease) {
  call("/v3/kv/put", putRequest(key, value, lease).dump());
}

std::optional<EtcdKeyValue> EtcdClient::get(const std::string& key) {
  return get(key, Deadline::after(timeout_));
}

std::optional<EtcdKeyValue> EtcdClient::get(const std::string& key, const Deadline& deadline) {
  const json reply = json::parse(call("/v3/kv/range", json{{"key", base64(key)}}.dump(), deadline));
  const auto kvs = reply.find("kvs");
  if (kvs == reply.end() || kvs->empty()) return std::nullopt;
  return keyValue(kvs->front());
}

std::vector<EtcdKeyValue> EtcdClient::list(const std::string& prefix) {
  const json request = {{"key", base64(prefix)}, {"range_end", base64(prefixEnd(prefix))}};
  const json reply = json::parse(call("/v3/kv/range", request.dump()));
  std::vector<EtcdKeyValue> out;
  if (const auto kvs = reply.find("kvs"); kvs != reply.end())
    for (const json& kv : *kvs) out.push_back(keyValue(kv));
  return out;
}

bool EtcdClient::erase(const std::string& key) {
  const json reply = json::parse(call("/v3/kv/deleterange", json{{"key", base64(key)}}.dump()));
  return integer(reply, "deleted") > 0;
}

void EtcdClient::erasePrefix(const std::string& prefix) {
  call("/v3/kv/deleterange", json{{"key", base64(prefix)}, {"range_end", base64(prefixEnd(prefix))}}.dump());
}

bool EtcdClient::putIfRevision(const std::string& key, std::int64_t modRevision, const Bytes& desired,
                               std::int64_t lease) {
  json compare = {{"key", base64(key)}, {"result", "EQUAL"}};
  if (modRevision == 0) {
    compare["target"] = "VERSION";
    compare["version"] = "0";
  } else {
    compare["target"] = "MOD";
    compare["mod_revision"] = std::to_string(modRevision);
  }
  const json request = {{"compare", json::array({compare})},
                        {"success", json::array({{{"request_put", putRequest(key, desired, lease)}}})}};
  return json::parse(call("/v3/kv/txn", request.dump())).value("succeeded", false);
}

bool EtcdClient::putIfValue(const std::string& key, const Bytes& expected, const Bytes& desired) {
  const json compare = {
      {"key", base64(key)}, {"result", "EQUAL"}, {"target", "VALUE"}, {"value", base64(expected)}};
  const json request = {{"compare", json::array({compare})},
                        {"success", json::array({{{"request_put", putRequest(key, desired, 0)}}})}};
  return json::parse(call("/v3/kv/txn", request.dump())).value("succeeded", false);
}

std::int64_t EtcdClient::grantLease(std::chrono::seconds ttl) {
  const json reply = json::parse(call("/v3/lease/grant", json{{"TTL", std::to_string(ttl.count())}}.dump()));
  const std::int64_t id = integer(reply, "ID");
  GYRE_ENFORCE(id != 0, "etcd granted no lease: ", reply.value("error", reply.dump()));
  return id;
}

bool EtcdClient::keepAlive(std::int64_t lease) {
  const json reply = json::parse(call("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}}.dump()));
  const auto result = reply.find("result");
  return result != reply.end() && integer(*result, "TTL") > 0;
}

void EtcdClient::revokeLease(std::int64_t lease) {
  call("/v3/lease/revoke", json{{"ID", std::to_string(lease)}}.dump());
}

}  // namespace gyre::rendezvous
