#include "tune/space_file.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "gyre/errors.h"

namespace gyre::tune {
namespace {

std::string at(const std::string& name, const toml::node& node) {
  return name + ":" + std::to_string(node.source().begin.line);
}

// A TOML value as a choice or grid value, or as a number of a distribution.
Json valueOf(const toml::node& node, const std::string& where) {
  if (const auto* i = node.as_integer()) return static_cast<std::int64_t>(i->get());
  if (const auto* d = node.as_floating_point()) return d->get();
  if (const auto* b = node.as_boolean()) return b->get();
  if (const auto* s = node.as_string()) return s->get();
  throw InvalidArgument(where + ": a value must be a number, true/false or a string");
}

Param fromList(const std::string& name, const toml::array& list, Distribution d, const std::string& where) {
  Param p;
  p.name = name;
  p.where = where;
  p.distribution = d;
  if (d == Distribution::kChoice || d == Distribution::kGrid) {
    for (const toml::node& v : list) p.values.push_back(valueOf(v, where));
  } else {
    const std::size_t want = d == Distribution::kQUniform ? 3 : 2;
    const std::string form = d == Distribution::kQUniform ? "[LOW, HIGH, Q]" : "[LOW, HIGH]";
    if (list.size() != want)
      throw InvalidArgument(where + ": parameter " + name + " (" + distributionName(d) + ") takes " + form);
    double numbers[3] = {0, 0, 0};
    for (std::size_t i = 0; i < want; ++i) {
      const Json v = valueOf(list[i], where);
      if (!v.is_number())
        throw InvalidArgument(where + ": parameter " + name + " (" + distributionName(d) +
                              ") takes numbers " + form);
      numbers[i] = v.get<double>();
    }
    p.low = numbers[0];
    p.high = numbers[1];
    p.q = numbers[2];
  }
  validate(p);
  return p;
}

Param fromNode(const std::string& name, const toml::node& node, const std::string& file) {
  const std::string where = at(file, node);
  if (const auto* s = node.as_string()) return parseParam(name + "=" + s->get(), where);
  if (const auto* list = node.as_array()) return fromList(name, *list, Distribution::kChoice, where);
  if (const auto* table = node.as_table(); table != nullptr && table->size() == 1) {
    // Keep the iterator: what it dereferences to lives inside it.
    const auto entry = table->begin();
    const std::string kind(entry->first.str());
    const toml::node& value = entry->second;
    const std::optional<Distribution> d = parseDistribution(kind);
    if (!d)
      throw InvalidArgument(where + ": unknown distribution \"" + kind + "\" for parameter " + name +
                            " (known: " + distributionNames() + ")");
    const auto* list = value.as_array();
    if (list == nullptr) throw InvalidArgument(where + ": parameter " + name + ": " + kind + " takes a list");
    return fromList(name, *list, *d, where);
  }
  throw InvalidArgument(where + ": parameter " + name +
                        " must be a string (\"loguniform:1e-4:1e-1\"), a list (a choice) or a table of one "
                        "distribution ({ grid = [1, 2] })");
}

}  // namespace

Space parseSpaceText(const std::string& text, const std::string& name) {
  toml::table root;
  try {
    root = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    throw InvalidArgument(name + ":" + std::to_string(e.source().begin.line) +
                          ": not TOML: " + std::string(e.description()));
  }
  // toml++ keeps a table's keys sorted; the space keeps the order they are written in.
  std::vector<std::pair<std::uint32_t, Param>> written;
  for (const auto& [key, node] : root)
    written.emplace_back(node.source().begin.line, fromNode(std::string(key.str()), node, name));
  std::stable_sort(written.begin(), written.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  Space space;
  for (auto& [line, param] : written) space.add(std::move(param));
  if (space.params.empty()) throw InvalidArgument(name + ": the search space holds no parameter");
  return space;
}

Space loadSpaceFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InvalidArgument("cannot read the search space " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return parseSpaceText(text.str(), path);
}

}  // namespace gyre::tune
