// gyre tune's search spaces (command line and TOML), searchers (grid, random, TPE).
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "gyre/errors.h"
#include "tune/searcher.h"
#include "tune/space_file.h"

namespace gyre::tune {
namespace {

std::string errorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TuneSpace, ParsesEveryDistribution) {
  const Param lr = parseParam("lr=loguniform:1e-4:1e-1", "--param lr");
  EXPECT_EQ(lr.distribution, Distribution::kLogUniform);
  EXPECT_DOUBLE_EQ(lr.low, 1e-4);
  EXPECT_DOUBLE_EQ(lr.high, 0.1);
  EXPECT_EQ(parseParam("b=choice:32,64,128", "x").describe(), "choice:32,64,128");
  EXPECT_EQ(parseParam("o=grid:sgd,adam", "x").values, (std::vector<Json>{"sgd", "adam"}));
  EXPECT_EQ(parseParam("q=quniform:0:1:0.25", "x").describe(), "quniform:0:1:0.25");
  EXPECT_EQ(parseParam("n=randint:1:4", "x").describe(), "randint:1:4");
  EXPECT_EQ(parseParam("u = uniform:0:0.5", "x").name, "u");
  const Param mixed = parseParam("m=choice:1,0.5,text", "x");
  EXPECT_TRUE(mixed.values[0].is_number_integer());
  EXPECT_TRUE(mixed.values[1].is_number_float());
  EXPECT_TRUE(mixed.values[2].is_string());
  EXPECT_FALSE(mixed.numeric());
}

TEST(TuneSpace, MalformedParametersNameThemselvesAndWhatIsWrong) {
  EXPECT_EQ(
      errorOf([] { parseParam("lr=normal:0:1", "--param lr"); }),
      "--param lr: unknown distribution \"normal\" for parameter lr (known: uniform, loguniform, quniform, "
      "randint, choice, grid)");
  EXPECT_EQ(errorOf([] { parseParam("lr=uniform:2:1", "--param lr"); }),
            "--param lr: parameter lr (uniform): LOW 2 is above HIGH 1");
  EXPECT_EQ(errorOf([] { parseParam("lr=loguniform:0:1", "--param lr"); }),
            "--param lr: parameter lr (loguniform): LOW must be above 0 for a log scale; got 0");
  EXPECT_EQ(errorOf([] { parseParam("b=choice:", "--param b"); }),
            "--param b: parameter b (choice) has no values to choose from");
  EXPECT_EQ(errorOf([] { parseParam("b=choice:1,,2", "--param b"); }),
            "--param b: parameter b (choice) has an empty value");
  EXPECT_EQ(errorOf([] { parseParam("n=randint:3:3", "--param n"); }),
            "--param n: parameter n (randint): HIGH is exclusive and must be above LOW; got 3 and 3");
  EXPECT_EQ(errorOf([] { parseParam("lr=uniform:1", "--param lr"); }),
            "--param lr: parameter lr (uniform) takes 2 numbers: uniform:LOW:HIGH; got \"uniform:1\"");
  EXPECT_EQ(errorOf([] { parseParam("lr=uniform:a:1", "--param lr"); }),
            "--param lr: the LOW must be a finite number; got \"a\"");
  EXPECT_EQ(errorOf([] { parseParam("lr", "--param lr"); }),
            "--param lr: expected NAME=DISTRIBUTION:ARGUMENTS (e.g. lr=loguniform:1e-4:1e-1); got \"lr\"");
  Space space;
  space.add(parseParam("lr=uniform:0:1", "--param lr"));
  EXPECT_EQ(errorOf([&] { space.add(parseParam("lr=uniform:0:2", "space.toml:4")); }),
            "space.toml:4: parameter lr is already given (--param lr)");
}

TEST(TuneSpace, DrawsStayInTheirRanges) {
  std::mt19937_64 rng(1);
  const Param lr = parseParam("lr=loguniform:1e-4:1e-1", "x");
  const Param q = parseParam("q=quniform:0:10:2", "x");
  const Param n = parseParam("n=randint:1:4", "x");
  std::set<std::int64_t> ns;
  for (int i = 0; i < 500; ++i) {
    const double v = sample(lr, rng).get<double>();
    EXPECT_GE(v, 1e-4);
    EXPECT_LE(v, 1e-1);
    const Json qv = sample(q, rng);
    ASSERT_TRUE(qv.is_number_integer());
    EXPECT_EQ(qv.get<std::int64_t>() % 2, 0);
    ns.insert(sample(n, rng).get<std::int64_t>());
  }
  EXPECT_EQ(ns, (std::set<std::int64_t>{1, 2, 3}));  // HIGH exclusive
}

TEST(TuneSpace, TomlFileGivesTheSameParametersInTheirOrderAndNamesLines) {
  const Space s = parseSpaceText(
      "lr = \"loguniform:1e-4:1e-1\"\n"
      "batch = [32, 64, 128]\n"
      "momentum = { grid = [0.5, 0.9] }\n"
      "dropout = { uniform = [0, 0.5] }\n",
      "space.toml");
  ASSERT_EQ(s.params.size(), 4u);
  EXPECT_EQ(s.params[0].name, "lr");
  EXPECT_EQ(s.params[1].describe(), "choice:32,64,128");
  EXPECT_EQ(s.params[2].describe(), "grid:0.5,0.9");
  EXPECT_EQ(s.params[3].describe(), "uniform:0:0.5");
  EXPECT_EQ(s.params[3].where, "space.toml:4");
  EXPECT_EQ(
      errorOf([] { parseSpaceText("a = \"uniform:0:1\"\n\nlr = { loguniform = [0, 1] }\n", "s.toml"); }),
      "s.toml:3: parameter lr (loguniform): LOW must be above 0 for a log scale; got 0");
  EXPECT_EQ(
      errorOf([] { parseSpaceText("a = { normal = [0, 1] }\n", "s.toml"); }),
      "s.toml:1: unknown distribution \"normal\" for parameter a (known: uniform, loguniform, quniform, "
      "randint, choice, grid)");
  EXPECT_EQ(errorOf([] { parseSpaceText("a = []\n", "s.toml"); }),
            "s.toml:1: parameter a (choice) has no values to choose from");
  EXPECT_NE(errorOf([] { parseSpaceText("a = = 1\n", "s.toml"); }).find("s.toml:1: not TOML"),
            std::string::npos);
  EXPECT_EQ(errorOf([] { parseSpaceText("# nothing\n", "s.toml"); }),
            "s.toml: the search space holds no parameter");
  EXPECT_EQ(errorOf([] { loadSpaceFile("/nonexistent/space.toml"); }),
            "cannot read the search space /nonexistent/space.toml");
}

TEST(TuneSearch, GridSearchCoversTheProductOnceEachRepeatInAnOrderOfItsOwn) {
  Space s;
  s.add(parseParam("a=grid:1,2,3", "x"));
  s.add(parseParam("b=grid:x,y", "x"));
  const auto search = makeSearcher({"random", 2, 7}, s);
  EXPECT_EQ(search->total(), 12);
  EXPECT_EQ(makeSearcher({"random", 1, 7}, s)->describe(), "grid search (6 points)");
  std::vector<std::string> first, second;
  for (int i = 0; i < 6; ++i) first.push_back(search->suggest(i, {}, 1).dump());
  for (int i = 6; i < 12; ++i) second.push_back(search->suggest(i, {}, 1).dump());
  const std::vector<std::string> product = {R"({"a":1,"b":"x"})", R"({"a":1,"b":"y"})", R"({"a":2,"b":"x"})",
                                            R"({"a":2,"b":"y"})", R"({"a":3,"b":"x"})", R"({"a":3,"b":"y"})"};
  EXPECT_EQ(std::set<std::string>(first.begin(), first.end()), std::set<std::string>(product.begin(), product.end()));
  EXPECT_EQ(std::set<std::string>(second.begin(), second.end()), std::set<std::string>(product.begin(), product.end()));
  EXPECT_NE(first, second);
  // The same seed, the same order, asked in any order (a resumed experiment).
  const auto again = makeSearcher({"random", 2, 7}, s);
  for (int i = 11; i >= 0; --i) EXPECT_EQ(again->suggest(i, {}, 1).dump(), (i < 6 ? first : second)[i % 6]);
}

TEST(TuneSearch, RandomSearchRepeatsTheGridAndDependsOnlyOnSeedAndIndex) {
  Space s;
  s.add(parseParam("lr=loguniform:1e-3:1", "x"));
  s.add(parseParam("b=grid:1,2", "x"));
  const auto a = makeSearcher({"random", 3, 5}, s);
  const auto b = makeSearcher({"random", 3, 5}, s);
  const auto c = makeSearcher({"random", 3, 6}, s);
  EXPECT_EQ(a->total(), 6);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(a->suggest(i, {}, 1), b->suggest(i, {}, 1));
    EXPECT_NE(a->suggest(i, {}, 1), c->suggest(i, {}, 1));
    EXPECT_TRUE(a->suggest(i, {}, 1).at("b") == 1 || a->suggest(i, {}, 1).at("b") == 2);
  }
  EXPECT_EQ(errorOf([&] { makeSearcher({"bayes", 1, 0}, s); }), "unknown --search bayes (random or tpe)");
  EXPECT_NE(errorOf([&] { makeSearcher({"random", 0, 0}, s); }).find("--samples"), std::string::npos);
}

// TPE after its random start proposes values nearer the optimum than random search does.
TEST(TuneSearch, TpeConcentratesNearTheBest) {
  Space s;
  s.add(parseParam("lr=loguniform:1e-5:1", "x"));
  s.add(parseParam("opt=choice:a,b,c", "x"));
  SearcherOptions o{"tpe", 60, 3};
  const auto tpe = makeSearcher(o, s);
  auto objective = [](const Json& c) {
    const double d = std::log10(c.at("lr").get<double>()) + 2;  // best at lr = 0.01, opt = b
    return -d * d - (c.at("opt") == "b" ? 0 : 1);
  };
  std::vector<Trial> trials;
  for (int i = 0; i < 60; ++i) {
    Trial t;
    t.id = i;
    t.config = tpe->suggest(i, trials, 1);
    t.results.push_back({1, objective(t.config), 0, Json::object()});
    trials.push_back(t);
  }
  auto meanDistance = [&](int from, int to) {
    double sum = 0;
    for (int i = from; i < to; ++i) sum += std::abs(std::log10(trials[i].config.at("lr").get<double>()) + 2);
    return sum / (to - from);
  };
  int bLate = 0;
  for (int i = 40; i < 60; ++i) bLate += trials[i].config.at("opt") == "b";
  EXPECT_LT(meanDistance(40, 60), 0.6 * meanDistance(0, 10)) << meanDistance(0, 10);
  EXPECT_GE(bLate, 12);
}

}  // namespace
}  // namespace gyre::tune
