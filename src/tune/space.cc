#include "tune/space.h"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "common/numbers.h"
#include "common/strings.h"
#include "gyre/errors.h"

namespace gyre::tune {
namespace {

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw InvalidArgument(fmt::format("{}: {}", where, what));
}

double number(const std::string& text, const std::string& where, const char* role) {
  const std::string t = trim(text);
  char* end = nullptr;
  errno = 0;
  const double v = t.empty() ? 0 : std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size() || errno == ERANGE || !std::isfinite(v))
    bad(where, fmt::format("the {} must be a finite number; got \"{}\"", role, t));
  return v;
}

struct Spelling {
  const char* name;
  Distribution distribution;
  int arguments;  // numbers after the name; -1: a list
};
constexpr Spelling kSpellings[] = {
    {"uniform", Distribution::kUniform, 2},   {"loguniform", Distribution::kLogUniform, 2},
    {"quniform", Distribution::kQUniform, 3}, {"randint", Distribution::kRandInt, 2},
    {"choice", Distribution::kChoice, -1},    {"grid", Distribution::kGrid, -1},
};

}  // namespace

std::string distributionNames() {
  std::string s;
  for (const Spelling& sp : kSpellings) {
    if (!s.empty()) s += ", ";
    s += sp.name;
  }
  return s;
}

std::optional<Distribution> parseDistribution(std::string_view name) {
  for (const Spelling& sp : kSpellings)
    if (name == sp.name) return sp.distribution;
  return std::nullopt;
}

const char* distributionName(Distribution d) {
  for (const Spelling& sp : kSpellings)
    if (sp.distribution == d) return sp.name;
  return "?";
}

bool Param::numeric() const {
  if (distribution != Distribution::kChoice && distribution != Distribution::kGrid) return true;
  for (const Json& v : values)
    if (!v.is_number()) return false;
  return true;
}

std::string Param::describe() const {
  std::string s = distributionName(distribution);
  if (distribution == Distribution::kChoice || distribution == Distribution::kGrid) {
    for (std::size_t i = 0; i < values.size(); ++i) {
      s += i == 0 ? ':' : ',';
      s += formatValue(values[i]);
    }
    return s;
  }
  s += fmt::format(":{}:{}", numbers::format(low), numbers::format(high));
  if (distribution == Distribution::kQUniform) s += fmt::format(":{}", numbers::format(q));
  return s;
}

void Space::add(Param p) {
  if (const Param* earlier = find(p.name))
    bad(p.where, fmt::format("parameter {} is already given ({})", p.name, earlier->where));
  params.push_back(std::move(p));
}

const Param* Space::find(const std::string& name) const {
  for (const Param& p : params)
    if (p.name == name) return &p;
  return nullptr;
}

std::int64_t Space::gridSize() const {
  std::int64_t n = 1;
  for (const Param& p : params)
    if (p.distribution == Distribution::kGrid) n *= static_cast<std::int64_t>(p.values.size());
  return n;
}

Json parseValue(const std::string& raw) {
  const std::string text = trim(raw);
  if (text == "true") return true;
  if (text == "false") return false;
  if (!text.empty()) {
    char* end = nullptr;
    errno = 0;
    const long long i = std::strtoll(text.c_str(), &end, 10);
    if (end == text.c_str() + text.size() && errno == 0) return static_cast<std::int64_t>(i);
    errno = 0;
    const double d = std::strtod(text.c_str(), &end);
    if (end == text.c_str() + text.size() && errno == 0 && std::isfinite(d)) return d;
  }
  return text;
}

void validate(const Param& p) {
  if (p.name.empty()) bad(p.where, "a parameter needs a name (NAME=DISTRIBUTION:ARGUMENTS)");
  for (char c : p.name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'))
      bad(p.where, fmt::format("parameter name \"{}\" may hold only letters, digits, '_' and '-'", p.name));
  const std::string what = fmt::format("parameter {} ({})", p.name, distributionName(p.distribution));
  switch (p.distribution) {
    case Distribution::kChoice:
    case Distribution::kGrid:
      if (p.values.empty()) bad(p.where, fmt::format("{} has no values to choose from", what));
      for (const Json& v : p.values)
        if (v.is_string() && v.get<std::string>().empty())
          bad(p.where, fmt::format("{} has an empty value", what));
      return;
    case Distribution::kQUniform:
      if (!(p.q > 0)) bad(p.where, fmt::format("{}: Q must be above 0; got {}", what, numbers::format(p.q)));
      [[fallthrough]];
    case Distribution::kUniform:
      if (p.low > p.high)
        bad(p.where, fmt::format("{}: LOW {} is above HIGH {}", what, numbers::format(p.low),
                                 numbers::format(p.high)));
      return;
    case Distribution::kLogUniform:
      if (!(p.low > 0))
        bad(p.where,
            fmt::format("{}: LOW must be above 0 for a log scale; got {}", what, numbers::format(p.low)));
      if (p.low > p.high)
        bad(p.where, fmt::format("{}: LOW {} is above HIGH {}", what, numbers::format(p.low),
                                 numbers::format(p.high)));
      return;
    case Distribution::kRandInt:
      if (p.low != std::floor(p.low) || p.high != std::floor(p.high))
        bad(p.where, fmt::format("{}: LOW and HIGH must be integers", what));
      if (p.low >= p.high)
        bad(p.where, fmt::format("{}: HIGH is exclusive and must be above LOW; got {} and {}", what,
                                 numbers::format(p.low), numbers::format(p.high)));
      return;
  }
}

Param parseParam(const std::string& text, const std::string& where) {
  Param p;
  p.where = where;
  const std::size_t eq = text.find('=');
  if (eq == std::string::npos)
    bad(where,
        fmt::format("expected NAME=DISTRIBUTION:ARGUMENTS (e.g. lr=loguniform:1e-4:1e-1); got \"{}\"", text));
  p.name = trim(std::string_view(text).substr(0, eq));
  const std::string spec = trim(std::string_view(text).substr(eq + 1));
  const std::size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const Spelling* spelling = nullptr;
  for (const Spelling& sp : kSpellings)
    if (kind == sp.name) spelling = &sp;
  if (spelling == nullptr)
    bad(where, fmt::format("unknown distribution \"{}\" for parameter {} (known: {})", kind, p.name,
                           distributionNames()));
  p.distribution = spelling->distribution;
  const std::string args = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (spelling->arguments < 0) {
    if (trim(args).empty())
      bad(where, fmt::format("parameter {} ({}) has no values to choose from", p.name, kind));
    for (const std::string& v : split(args, ',')) p.values.push_back(parseValue(v));
  } else {
    const std::vector<std::string> parts = split(args, ':');
    if (args.empty() || static_cast<int>(parts.size()) != spelling->arguments)
      bad(where, fmt::format("parameter {} ({}) takes {} numbers: {}{}; got \"{}\"", p.name, kind,
                             spelling->arguments, kind,
                             spelling->arguments == 3 ? ":LOW:HIGH:Q" : ":LOW:HIGH", spec));
    p.low = number(parts[0], where, "LOW");
    p.high = number(parts[1], where, "HIGH");
    if (spelling->arguments == 3) p.q = number(parts[2], where, "Q");
  }
  validate(p);
  return p;
}

Json sample(const Param& p, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  switch (p.distribution) {
    case Distribution::kUniform:
      return p.low + (p.high - p.low) * unit(rng);
    case Distribution::kLogUniform:
      return std::exp(std::log(p.low) + (std::log(p.high) - std::log(p.low)) * unit(rng));
    case Distribution::kQUniform: {
      const double v = std::round((p.low + (p.high - p.low) * unit(rng)) / p.q) * p.q;
      // A whole Q gives whole values: keep them integers, as Ray's quniform of integers does not.
      if (p.q == std::floor(p.q) && std::abs(v) < 9e15) return static_cast<std::int64_t>(v);
      return v;
    }
    case Distribution::kRandInt: {
      std::uniform_int_distribution<std::int64_t> pick(static_cast<std::int64_t>(p.low),
                                                       static_cast<std::int64_t>(p.high) - 1);
      return pick(rng);
    }
    case Distribution::kChoice:
    case Distribution::kGrid: {
      std::uniform_int_distribution<std::size_t> pick(0, p.values.size() - 1);
      return p.values[pick(rng)];
    }
  }
  return nullptr;
}

Json gridPoint(const Space& space, std::int64_t index) {
  Json point = Json::object();
  for (auto it = space.params.rbegin(); it != space.params.rend(); ++it) {
    if (it->distribution != Distribution::kGrid) continue;
    const auto n = static_cast<std::int64_t>(it->values.size());
    point[it->name] = it->values[static_cast<std::size_t>(index % n)];
    index /= n;
  }
  return point;
}

std::string formatValue(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  if (v.is_number()) return numbers::format(v.get<double>());
  return v.dump();
}

}  // namespace gyre::tune
