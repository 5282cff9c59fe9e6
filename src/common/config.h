// Every GYRE_* environment knob, declared once in one table (config.cc), and typed getters
// that read them from an environment map. The environment is read at bootstrap (gyre::init,
// the tool's main) by processEnvironment(), the one function of gyre that reads it, and passed
// around as values.
//
// Thread-safety: everything here is a pure function of its arguments (the table is constant).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace gyre::config {

using Env = std::map<std::string, std::string>;

enum class KnobType : std::uint8_t {
  kInt,     // decimal integer within [min, max]
  kBool,    // 1/0, true/false, yes/no, on/off (any case)
  kString,  // free text
  kChoice,  // one of `choices` (any case; getChoice returns it lower-cased)
};

// Who sets a knob: the user (or a job script), or a launcher for each process it starts (`gyre
// run` sets these itself and never forwards the user's values of them to remote workers).
enum class KnobOrigin : std::uint8_t { kUser, kLauncher };

struct Knob {
  std::string_view name;  // "GYRE_TIMEOUT_MS"
  KnobType type;
  std::string_view defaultValue;  // as the user would write it; empty: unset / derived
  std::string_view doc;           // one line
  std::string_view choices = {};  // kChoice: "auto|tcp|shm"
  std::int64_t min = 0;           // kInt only
  std::int64_t max = INT64_MAX;   // kInt only
  KnobOrigin origin = KnobOrigin::kUser;
};

// The process environment (environ) as a map, as it is at the call.
Env processEnvironment();

// The whole table, in documentation order.
std::span<const Knob> knobs();
// The knob called `name`; throws InvalidArgument for a name not in the table.
const Knob& knob(std::string_view name);
// The table as Markdown (docs/configuration.md) or as aligned text (`gyre info`). The text form
// shows each knob's value and where it comes from (environment or default), and marks a value
// its getter would reject with the reason (checkValue).
std::string formatMarkdown();
std::string formatText(const Env& env = {});

// Why the knob's typed getter would reject env's value of `name` (GYRE_COST_MODEL's own parser
// included): the getter's message without its file:line, for people at a terminal. "" when the
// value is valid or unset. Throws InvalidArgument for a name not in the table.
std::string checkValue(const Env& env, std::string_view name);

// Checks every knob set in `env` the way its getter would and throws InvalidArgument for the
// first one (in table order) whose value is malformed, naming it and the accepted values.
// gyre::init() and the gyre tool call it once at start, so a bad value stops a program before
// it does anything instead of being read as a default later.
void checkEnvironment(const Env& env);

// True when `name` is present in env with a non-empty value (an empty value counts as unset).
bool isSet(const Env& env, std::string_view name);

// Typed getters: the value in env, or the knob's default when unset. Each throws
// InvalidArgument naming the knob and the accepted values when the value is malformed, and
// when the name is not in the table or has another type. The optional forms return nullopt
// when the knob is unset (ignoring the default).
std::int64_t getInt(const Env& env, std::string_view name);
std::optional<std::int64_t> getOptionalInt(const Env& env, std::string_view name);
bool getBool(const Env& env, std::string_view name);
std::string getString(const Env& env, std::string_view name);
std::string getChoice(const Env& env, std::string_view name);

// GYRE_COST_MODEL: "alpha_us,beta_GBps,gamma_GBps" (latency per message, link bandwidth,
// reduction bandwidth). nullopt when unset (the cost model is then measured).
struct CostModelOverride {
  double alphaUs = 0;
  double betaGBps = 0;
  double gammaGBps = 0;
};
std::optional<CostModelOverride> getCostModel(const Env& env);

// Parses a boolean the way kBool knobs do; nullopt when `text` is not one.
std::optional<bool> parseBool(std::string_view text);

}  // namespace gyre::config
