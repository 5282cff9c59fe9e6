// HTTP/1.1 requests as gyre serve's ingress reads them (http_server.h): a parser fed the bytes of
// one connection as they arrive, one request at a time. It takes a request line, headers (names
// compared without case), and a body by Content-Length or chunked transfer coding; it refuses,
// with the status and a message naming the problem, headers over their limit (431), a body over
// its limit (413, as soon as the headers announce it), a malformed request (400), another HTTP
// version (505) or another transfer coding (501). libtorch-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gyre::serve {

struct HttpRequest {
  std::string method;
  std::string target;  // as sent: path and query
  std::string path;    // the target up to '?'
  int minorVersion = 1;  // HTTP/1.x
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-case, values trimmed
  std::string body;

  // The value of the first header of that name (any case), or "".
  std::string header(std::string_view name) const;
  // HTTP/1.1 keeps the connection unless "Connection: close"; 1.0 only with "Connection: keep-alive".
  bool keepAlive() const;
  // "Expect: 100-continue": the client waits for a 100 before it sends the body.
  bool expectsContinue() const;
};

struct HttpLimits {
  std::size_t maxHeaderBytes = 64 * 1024;  // request line and headers
  std::size_t maxBodyBytes = 64 * 1024 * 1024;
};

class RequestParser {
 public:
  enum class Progress {
    kMore,     // needs more bytes
    kHeaders,  // the headers are in (once per request; feed again for the body)
    kDone,     // request() is complete
    kFailed,   // status() and error() say why; the connection cannot go on
  };

  explicit RequestParser(HttpLimits limits) : limits_(limits) {}

  // Consumes what it can of `in` (the connection's unread bytes) and says how far the request is;
  // `used` is how many bytes from the front it took (the caller drops them before the next
  // feed). After kDone, take() the request; the parser then reads the next one from what is left.
  Progress feed(std::string_view in, std::size_t& used);
  HttpRequest take();

  // After kHeaders: the request's line and headers (its body still to come).
  const HttpRequest& head() const { return request_; }
  // After kHeaders: a body is still to be read.
  bool awaitingBody() const { return stage_ != Stage::kBody || bodyLeft_ > 0; }

  // True once any byte of the current request has been consumed (for the request's deadline).
  bool begun() const { return begun_; }
  int status() const { return status_; }
  const std::string& error() const { return error_; }

 private:
  enum class Stage { kHead, kBody, kChunkSize, kChunkData, kChunkEnd, kTrailers, kDone, kFailed };

  Progress fail(int status, std::string error);
  std::string headersTooLarge() const;
  Progress parseHead(std::string_view head);
  Progress feedChunked(std::string_view in, std::size_t& used);

  HttpLimits limits_;
  Stage stage_ = Stage::kHead;
  HttpRequest request_;
  std::size_t bodyLeft_ = 0;   // Content-Length still to read, or the current chunk's
  std::size_t searched_ = 0;   // bytes of `in` already searched for the end of the headers
  bool begun_ = false;
  int status_ = 0;
  std::string error_;
};

}  // namespace gyre::serve
