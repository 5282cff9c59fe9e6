// A search space: the hyperparameters a tune experiment varies, each with its distribution, in
// the names Ray Tune uses. A parameter comes from the command line (`--param lr=loguniform:1e-4:1e-1`)
// or from a TOML file (space_file.cc); both give the same Param, which remembers where it was
// written so that every error can name it ("--param lr" or "space.toml:3").
//
//   uniform:LOW:HIGH        a real number, uniform in [LOW, HIGH]
//   loguniform:LOW:HIGH     a real number whose logarithm is uniform (0 < LOW)
//   quniform:LOW:HIGH:Q     uniform, rounded to a multiple of Q
//   randint:LOW:HIGH        an integer in [LOW, HIGH) (HIGH exclusive, as Ray's and numpy's)
//   choice:A,B,C            one of the values, each as likely
//   grid:A,B,C              every value, in turn: the experiment's trials cover the grid's product
//
// Values are numbers (integers stay integers) or text, as nlohmann::json holds them.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace gyre::tune {

using Json = nlohmann::json;

enum class Distribution { kUniform, kLogUniform, kQUniform, kRandInt, kChoice, kGrid };

const char* distributionName(Distribution d);
// The distribution called `name`, or nullopt.
std::optional<Distribution> parseDistribution(std::string_view name);
// "uniform, loguniform, quniform, randint, choice, grid", for messages.
std::string distributionNames();

struct Param {
  std::string name;
  Distribution distribution = Distribution::kUniform;
  double low = 0;
  double high = 0;
  double q = 0;
  std::vector<Json> values;  // choice and grid
  std::string where;         // where it was written, for messages: "--param lr", "space.toml:3"

  bool numeric() const;  // every distribution but a choice or grid with a text value
  // "loguniform:0.001:0.3", "choice:32,64,128": the form it is written in.
  std::string describe() const;
};

struct Space {
  std::vector<Param> params;

  // Adds `p`; a name given twice is an error naming both places. Throws InvalidArgument.
  void add(Param p);
  const Param* find(const std::string& name) const;
  // The number of grid points: the product of the grid parameters' sizes (1 without any).
  std::int64_t gridSize() const;
};

// Parses "NAME=DIST:ARGS". Throws InvalidArgument naming `where` and what is wrong (an unknown
// distribution, LOW > HIGH, a log range that reaches 0, an empty choice, a missing argument).
Param parseParam(const std::string& text, const std::string& where);
// The same check for a Param built some other way (a file's table); throws InvalidArgument.
void validate(const Param& p);
// A value written in a choice or grid list: an integer, a real number, true/false or text.
Json parseValue(const std::string& text);

// One draw of a non-grid parameter.
Json sample(const Param& p, std::mt19937_64& rng);
// Grid point `index` (0 .. gridSize - 1) of the grid parameters, as name -> value; the last
// grid parameter varies fastest, as Ray's grid_search does.
Json gridPoint(const Space& space, std::int64_t index);

// The value `v` as it goes on a command line: integers without a point, reals in the shortest
// form that reads back the same, text as it is.
std::string formatValue(const Json& v);

}  // namespace gyre::tune
