#include "serve/http_request.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace gyre::serve {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool isToken(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
  });
}

// The end of the line that starts at `from` in `s` (the index of its '\n'), or npos.
std::size_t lineEnd(std::string_view s, std::size_t from) { return s.find('\n', from); }

std::string_view withoutCr(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
  const std::string key = lower(name);
  for (const auto& [k, v] : headers)
    if (k == key) return v;
  return "";
}

bool HttpRequest::keepAlive() const {
  const std::string connection = lower(header("connection"));
  if (minorVersion == 0) return connection.find("keep-alive") != std::string::npos;
  return connection.find("close") == std::string::npos;
}

bool HttpRequest::expectsContinue() const { return lower(header("expect")) == "100-continue"; }

std::string RequestParser::headersTooLarge() const {
  return "the request's headers are larger than " + std::to_string(limits_.maxHeaderBytes / 1024) + " KiB";
}

RequestParser::Progress RequestParser::fail(int status, std::string error) {
  stage_ = Stage::kFailed;
  status_ = status;
  error_ = std::move(error);
  return Progress::kFailed;
}

HttpRequest RequestParser::take() {
  HttpRequest r = std::move(request_);
  request_ = HttpRequest{};
  stage_ = Stage::kHead;
  searched_ = 0;
  begun_ = false;
  return r;
}

RequestParser::Progress RequestParser::parseHead(std::string_view head) {
  std::size_t at = lineEnd(head, 0);
  const std::string_view line = withoutCr(head.substr(0, at));
  const std::size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp2 == sp1) return fail(400, "the request line is not METHOD TARGET HTTP/1.1");
  request_.method = std::string(line.substr(0, sp1));
  request_.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  const std::string_view version = line.substr(sp2 + 1);
  if (!isToken(request_.method) || request_.target.empty() || request_.target.find(' ') != std::string::npos)
    return fail(400, "the request line is not METHOD TARGET HTTP/1.1");
  if (version == "HTTP/1.1") {
    request_.minorVersion = 1;
  } else if (version == "HTTP/1.0") {
    request_.minorVersion = 0;
  } else {
    return fail(505, "HTTP version '" + std::string(version).substr(0, 20) + "' is not served (HTTP/1.1 and 1.0 are)");
  }
  request_.path = request_.target.substr(0, request_.target.find('?'));
  while (at != std::string_view::npos && at + 1 < head.size()) {
    const std::size_t end = lineEnd(head, at + 1);
    const std::string_view h = withoutCr(head.substr(at + 1, end == std::string_view::npos ? end : end - at - 1));
    at = end;
    if (h.empty()) break;
    const std::size_t colon = h.find(':');
    if (colon == std::string_view::npos || !isToken(h.substr(0, colon)))
      return fail(400, "a header line is not NAME: VALUE");
    request_.headers.emplace_back(lower(h.substr(0, colon)), std::string(trim(h.substr(colon + 1))));
  }
  const std::string coding = lower(request_.header("transfer-encoding"));
  const std::string length = request_.header("content-length");
  for (const auto& [k, v] : request_.headers)
    if (k == "content-length" && v != length) return fail(400, "the request has two different Content-Lengths");
  if (!coding.empty()) {
    if (coding != "chunked") return fail(501, "transfer coding '" + coding.substr(0, 40) + "' is not served (chunked is)");
    if (!length.empty()) return fail(400, "a request has both Content-Length and Transfer-Encoding");
    stage_ = Stage::kChunkSize;
    return Progress::kHeaders;
  }
  bodyLeft_ = 0;
  if (!length.empty()) {
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(length.data(), length.data() + length.size(), n);
    if (ec != std::errc() || end != length.data() + length.size()) return fail(400, "Content-Length is not a number");
    if (n > limits_.maxBodyBytes) return fail(413, "the body is larger than --max-body-bytes");
    bodyLeft_ = static_cast<std::size_t>(n);
  }
  stage_ = Stage::kBody;
  return Progress::kHeaders;
}

RequestParser::Progress RequestParser::feedChunked(std::string_view in, std::size_t& used) {
  used = 0;
  while (true) {
    if (stage_ == Stage::kChunkData) {
      const std::size_t n = std::min(bodyLeft_, in.size() - used);
      request_.body.append(in.substr(used, n));
      used += n;
      bodyLeft_ -= n;
      if (bodyLeft_ > 0) return Progress::kMore;
      stage_ = Stage::kChunkEnd;
      continue;
    }
    const std::size_t end = in.find('\n', used);
    if (end == std::string_view::npos) {
      if (in.size() - used > 1024) return fail(400, "a chunk's size line is too long");
      return Progress::kMore;
    }
    const std::string_view line = withoutCr(in.substr(used, end - used));
    used = end + 1;
    if (stage_ == Stage::kChunkEnd) {
      if (!line.empty()) return fail(400, "a chunk does not end with CRLF");
      stage_ = Stage::kChunkSize;
    } else if (stage_ == Stage::kChunkSize) {
      const std::string_view size = trim(line.substr(0, line.find(';')));
      std::uint64_t n = 0;
      const auto [p, ec] = std::from_chars(size.data(), size.data() + size.size(), n, 16);
      if (size.empty() || ec != std::errc() || p != size.data() + size.size())
        return fail(400, "a chunk's size is not hexadecimal");
      if (n > limits_.maxBodyBytes - request_.body.size()) return fail(413, "the body is larger than --max-body-bytes");
      if (n == 0) {
        stage_ = Stage::kTrailers;
      } else {
        bodyLeft_ = static_cast<std::size_t>(n);
        stage_ = Stage::kChunkData;
      }
    } else if (line.empty()) {  // the blank line after the trailers
      stage_ = Stage::kDone;
      return Progress::kDone;
    }
  }
}

RequestParser::Progress RequestParser::feed(std::string_view in, std::size_t& used) {
  used = 0;
  switch (stage_) {
    case Stage::kFailed: return Progress::kFailed;
    case Stage::kDone: return Progress::kDone;
    case Stage::kHead: {
      // Empty lines before a request are skipped (RFC 9112 2.2).
      if (!begun_) {
        const std::size_t text = in.find_first_not_of("\r\n");
        used = text == std::string_view::npos ? in.size() : text;
        in.remove_prefix(used);
        if (in.empty()) return Progress::kMore;
        begun_ = true;
      }
      std::size_t end = std::string_view::npos, length = 0;
      for (std::size_t at = in.find('\n', searched_); at != std::string_view::npos; at = in.find('\n', at + 1)) {
        // A line that is empty but for its CR ends the headers.
        if (at + 1 < in.size() && in[at + 1] == '\n') {
          end = at, length = 2;
          break;
        }
        if (at + 2 < in.size() && in[at + 1] == '\r' && in[at + 2] == '\n') {
          end = at, length = 3;
          break;
        }
      }
      if (end == std::string_view::npos) {
        searched_ = in.size() < 3 ? 0 : in.size() - 3;  // an end could begin in the last bytes
        if (in.size() > limits_.maxHeaderBytes) return fail(431, headersTooLarge());
        return Progress::kMore;
      }
      if (end + length > limits_.maxHeaderBytes) return fail(431, headersTooLarge());
      used += end + length;
      return parseHead(in.substr(0, end + 1));
    }
    case Stage::kBody: {
      const std::size_t n = std::min(bodyLeft_, in.size());
      request_.body.append(in.substr(0, n));
      used = n;
      bodyLeft_ -= n;
      if (bodyLeft_ > 0) return Progress::kMore;
      stage_ = Stage::kDone;
      return Progress::kDone;
    }
    default: return feedChunked(in, used);
  }
}

}  // namespace gyre::serve
