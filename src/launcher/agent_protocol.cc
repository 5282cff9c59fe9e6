#include "launcher/agent_protocol.h"

#include <charconv>
#include <nlohmann/json.hpp>

#include "common/check.h"

namespace gyre::launcher {
namespace {

using nlohmann::json;

// Reads the integer fields of an event line: "X 3 -1 9 1200".
class Fields {
 public:
  Fields(const std::string& line, std::size_t pos) : line_(line), pos_(pos) {}

  std::int64_t next() {
    if (pos_ >= line_.size() || line_[pos_] != ' ')
      GYRE_THROW(ProtocolError, "agent event '", line_, "' is truncated");
    ++pos_;
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(line_.data() + pos_, line_.data() + line_.size(), value);
    if (ec != std::errc()) GYRE_THROW(ProtocolError, "agent event '", line_, "' has a malformed number");
    pos_ = static_cast<std::size_t>(end - line_.data());
    return value;
  }
  // The rest of the line after one space.
  std::string rest() {
    if (pos_ >= line_.size()) return "";
    if (line_[pos_] != ' ') GYRE_THROW(ProtocolError, "agent event '", line_, "' is malformed");
    return line_.substr(pos_ + 1);
  }
  void end() const {
    if (pos_ != line_.size()) GYRE_THROW(ProtocolError, "agent event '", line_, "' has trailing text");
  }

 private:
  const std::string& line_;
  std::size_t pos_;
};

}  // namespace

std::string encodeSpec(const AgentSpec& s) {
  json env = json::array();
  for (const auto& [k, v] : s.env) env.push_back({k, v});
  const json j = {{"host", s.host},
                  {"job_id", s.jobId},
                  {"secret", s.secret},
                  {"store", s.storeCandidates},
                  {"world_size", s.worldSize},
                  {"first_rank", s.firstRank},
                  {"count", s.count},
                  {"program", s.program},
                  {"env", env},
                  {"threads", s.threads},
                  {"core_share", s.coreShare},
                  {"start_timeout_ms", s.startTimeoutMs},
                  {"interface", s.interface},
                  {"stop_grace_ms", s.stopGraceMs},
                  {"restart_count", s.restartCount},
                  {"max_restarts", s.maxRestarts},
                  {"ps_servers", s.psServers},
                  {"server_indices", s.serverIndices}};
  return j.dump();
}

AgentSpec decodeSpec(const std::string& line) {
  AgentSpec s;
  try {
    const json j = json::parse(line);
    s.host = j.at("host").get<std::string>();
    s.jobId = j.at("job_id").get<std::string>();
    s.secret = j.at("secret").get<std::string>();
    s.storeCandidates = j.at("store").get<std::vector<std::string>>();
    s.worldSize = j.at("world_size").get<int>();
    s.firstRank = j.at("first_rank").get<int>();
    s.count = j.at("count").get<int>();
    s.program = j.at("program").get<std::vector<std::string>>();
    for (const auto& pair : j.at("env"))
      s.env.emplace_back(pair.at(0).get<std::string>(), pair.at(1).get<std::string>());
    s.threads = j.at("threads").get<int>();
    s.coreShare = j.value("core_share", 0);
    s.startTimeoutMs = j.at("start_timeout_ms").get<int>();
    s.interface = j.at("interface").get<std::string>();
    s.stopGraceMs = j.at("stop_grace_ms").get<int>();
    s.restartCount = j.at("restart_count").get<int>();
    s.maxRestarts = j.at("max_restarts").get<int>();
    s.psServers = j.at("ps_servers").get<int>();
    s.serverIndices = j.at("server_indices").get<std::vector<int>>();
  } catch (const json::exception& e) {
    GYRE_THROW(ProtocolError, "malformed job description from the launcher: ", e.what());
  }
  if (s.worldSize < 1 || s.count < 1 || s.firstRank < 0 || s.firstRank + s.count > s.worldSize ||
      s.program.empty() || s.storeCandidates.empty() || s.threads < 0 || s.coreShare < 0 ||
      s.startTimeoutMs < 1 || s.stopGraceMs < 0 || s.restartCount < 0 || s.maxRestarts < s.restartCount ||
      s.psServers < 0)
    GYRE_THROW(ProtocolError, "inconsistent job description from the launcher");
  if (!s.serverIndices.empty()) {
    bool inRange = s.worldSize == s.psServers && s.count == static_cast<int>(s.serverIndices.size());
    for (int i : s.serverIndices) inRange &= i >= 0 && i < s.psServers;
    if (!inRange)
      GYRE_THROW(ProtocolError, "inconsistent parameter servers in the job description from the launcher");
  }
  return s;
}

std::string encodeEvent(const Event& e) {
  std::string line(1, static_cast<char>(e.kind));
  auto add = [&](std::int64_t v) { line += ' ' + std::to_string(v); };
  switch (e.kind) {
    case Event::Kind::kStore:
    case Event::Kind::kFailed:
      line += ' ' + e.text;
      break;
    case Event::Kind::kStarted:
      add(e.rank), add(e.pid);
      break;
    case Event::Kind::kOutput:
      add(e.rank), add(e.fromStderr ? 1 : 0), add(e.terminator == '\n' ? 0 : e.terminator == '\r' ? 1 : 2);
      line += ' ' + e.text;
      break;
    case Event::Kind::kExit:
      add(e.rank), add(e.code), add(e.signal), add(e.elapsedMs);
      break;
    case Event::Kind::kDone:
      break;
  }
  return line;
}

Event decodeEvent(const std::string& line) {
  if (line.empty()) GYRE_THROW(ProtocolError, "empty agent event");
  Event e;
  e.kind = static_cast<Event::Kind>(line[0]);
  Fields f(line, 1);
  switch (e.kind) {
    case Event::Kind::kStore:
    case Event::Kind::kFailed:
      e.text = f.rest();
      break;
    case Event::Kind::kStarted:
      e.rank = static_cast<int>(f.next());
      e.pid = static_cast<pid_t>(f.next());
      f.end();
      break;
    case Event::Kind::kOutput: {
      e.rank = static_cast<int>(f.next());
      e.fromStderr = f.next() != 0;
      const auto t = f.next();
      e.terminator = t == 0 ? '\n' : t == 1 ? '\r' : '\0';
      e.text = f.rest();
      break;
    }
    case Event::Kind::kExit:
      e.rank = static_cast<int>(f.next());
      e.code = static_cast<int>(f.next());
      e.signal = static_cast<int>(f.next());
      e.elapsedMs = f.next();
      f.end();
      break;
    case Event::Kind::kDone:
      f.end();
      break;
    default:
      GYRE_THROW(ProtocolError, "unknown agent event '", line.substr(0, 80), "'");
  }
  return e;
}

std::string shellQuote(const std::string& word) {
  if (!word.empty() &&
      word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=@,+") ==
          std::string::npos)
    return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::vector<std::string> splitCommandLine(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool inWord = false;
  char quote = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < line.size()) {
        word += line[++i];
      } else {
        word += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c, inWord = true;
    } else if (c == '\\' && i + 1 < line.size()) {
      word += line[++i], inWord = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (inWord) words.push_back(word);
      word.clear(), inWord = false;
    } else {
      word += c, inWord = true;
    }
  }
  GYRE_USAGE_CHECK(quote == 0, "unterminated quote in '", line, "'");
  if (inWord) words.push_back(word);
  return words;
}

}  // namespace gyre::launcher
