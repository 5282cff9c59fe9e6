#include "rendezvous/tcp_store_protocol.h"

#include <cstdio>
#include <sstream>

#include "common/check.h"
#include "rendezvous/wire.h"

namespace gyre::rendezvous {
namespace {

std::vector<std::uint8_t> frame(const std::vector<std::uint8_t>& body) {
  GYRE_ENFORCE_LE(body.size(), kMaxFrameBodyBytes, "store message too large");
  std::vector<std::uint8_t> out(kFrameHeaderBytes);
  putU32(out.data(), kFrameMagic);
  putU32(out.data() + 4, static_cast<std::uint32_t>(body.size()));
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

std::span<const std::uint8_t> asBytes(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

void expectEnd(const ByteReader& reader, const char* what) {
  if (reader.remaining() != 0)
    GYRE_THROW(ProtocolError, what, " has ", reader.remaining(), " unexpected trailing bytes");
}

}  // namespace

std::string_view toString(Command command) {
  switch (command) {
    case Command::kSet:
      return "set";
    case Command::kGet:
      return "get";
    case Command::kAdd:
      return "add";
    case Command::kCompareSet:
      return "compareSet";
    case Command::kDelete:
      return "delete";
    case Command::kCheck:
      return "check";
    case Command::kWait:
      return "wait";
  }
  return "?";
}

std::string printable(std::span<const std::uint8_t> bytes, std::size_t maxShown) {
  std::string out = "'";
  for (std::size_t i = 0; i < bytes.size() && i < maxShown; ++i) {
    const unsigned char c = bytes[i];
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[5];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  out += bytes.size() > maxShown ? "'..." : "'";
  if (bytes.size() > maxShown) {
    out += "(";
    out += std::to_string(bytes.size());
    out += " bytes)";
  }
  return out;
}

std::string Request::debugString() const {
  std::ostringstream out;
  out << "Request{" << toString(command) << " keys=[";
  for (std::size_t i = 0; i < keys.size() && i < 4; ++i)
    out << (i ? ", " : "") << printable(asBytes(keys[i]));
  if (keys.size() > 4) out << ", ... " << keys.size() << " keys";
  out << "]";
  if (command == Command::kSet || command == Command::kCompareSet) out << " value=" << printable(value);
  if (command == Command::kCompareSet) out << " expected=" << printable(expected);
  if (command == Command::kAdd) out << " delta=" << number;
  if (command == Command::kGet || command == Command::kWait) out << " timeout_ms=" << number;
  out << "}";
  return out.str();
}

std::string Response::debugString() const {
  std::ostringstream out;
  out << "Response{"
      << (status == Status::kOk        ? "ok"
          : status == Status::kTimeout ? "timeout"
                                       : "invalid_argument")
      << " flag=" << flag << " number=" << number << " value=" << printable(value);
  if (!message.empty()) out << " message=" << printable(asBytes(message), 200);
  out << "}";
  return out.str();
}

std::vector<std::uint8_t> encodeFrame(const Request& request) {
  std::vector<std::uint8_t> body;
  ByteWriter writer(body);
  writer.u8(static_cast<std::uint8_t>(request.command));
  writer.u32(static_cast<std::uint32_t>(request.keys.size()));
  for (const auto& key : request.keys) writer.bytes(key);
  writer.bytes(request.value);
  writer.bytes(request.expected);
  writer.i64(request.number);
  return frame(body);
}

std::vector<std::uint8_t> encodeFrame(const Response& response) {
  std::vector<std::uint8_t> body;
  ByteWriter writer(body);
  writer.u8(static_cast<std::uint8_t>(response.status));
  writer.u8(response.flag ? 1 : 0);
  writer.i64(response.number);
  writer.bytes(response.value);
  writer.bytes(response.message.substr(0, kMaxMessageBytes));
  return frame(body);
}

std::size_t parseFrameHeader(const std::uint8_t* header) {
  const std::uint32_t magic = getU32(header);
  if (magic != kFrameMagic)
    GYRE_THROW(ProtocolError, "bad store frame magic ", printable({header, 4}),
               " (not a gyre store client?)");
  const std::size_t bytes = getU32(header + 4);
  if (bytes > kMaxFrameBodyBytes)
    GYRE_THROW(ProtocolError, "store frame of ", bytes, " bytes exceeds the limit of ", kMaxFrameBodyBytes);
  return bytes;
}

Request decodeRequest(std::span<const std::uint8_t> body) {
  ByteReader reader(body);
  Request request;
  const std::uint8_t command = reader.u8("command");
  if (command < static_cast<std::uint8_t>(Command::kSet) ||
      command > static_cast<std::uint8_t>(Command::kWait))
    GYRE_THROW(ProtocolError, "unknown store command ", static_cast<int>(command));
  request.command = static_cast<Command>(command);
  const std::uint32_t count = reader.u32("key count");
  const bool multiKey = request.command == Command::kCheck || request.command == Command::kWait;
  if (multiKey ? count > kMaxKeysPerCall : count != 1)
    GYRE_THROW(ProtocolError, "store ", toString(request.command), " with ", count, " keys");
  // Each key takes at least its 4-byte length: a count the body cannot hold is refused here.
  if (count > reader.remaining() / 4)
    GYRE_THROW(ProtocolError, "truncated message: ", count, " keys in ", reader.remaining(), " bytes");
  request.keys.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) request.keys.push_back(reader.string(kMaxKeyBytes, "key"));
  request.value = reader.bytes(kMaxValueBytes, "value");
  request.expected = reader.bytes(kMaxValueBytes, "expected value");
  request.number = reader.i64("number");
  expectEnd(reader, "store request");
  return request;
}

Response decodeResponse(std::span<const std::uint8_t> body) {
  ByteReader reader(body);
  Response response;
  const std::uint8_t status = reader.u8("status");
  if (status > static_cast<std::uint8_t>(Status::kInvalidArgument))
    GYRE_THROW(ProtocolError, "unknown store response status ", static_cast<int>(status));
  response.status = static_cast<Status>(status);
  response.flag = reader.u8("flag") != 0;
  response.number = reader.i64("number");
  response.value = reader.bytes(kMaxValueBytes, "value");
  response.message = reader.string(kMaxMessageBytes, "message");
  expectEnd(reader, "store response");
  return response;
}

}  // namespace gyre::rendezvous
