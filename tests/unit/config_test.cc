// The GYRE_* knob table and its typed getters.
#include "common/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gyre/errors.h"
#include "support/jobs.h"

namespace gyre::config {
namespace {

TEST(Config, TableDeclaresEveryKnobOnceWithDocs) {
  std::set<std::string_view> names;
  for (const Knob& k : knobs()) {
    EXPECT_TRUE(k.name.starts_with("GYRE_")) << k.name;
    EXPECT_FALSE(k.doc.empty()) << k.name;
    EXPECT_TRUE(names.insert(k.name).second) << "duplicate " << k.name;
    if (k.type == KnobType::kChoice) {
      EXPECT_FALSE(k.choices.empty()) << k.name;
    }
  }
  for (const char* required :
       {"GYRE_RANK", "GYRE_WORLD_SIZE", "GYRE_LOCAL_RANK", "GYRE_LOCAL_SIZE", "GYRE_STORE_ADDR",
        "GYRE_SECRET", "GYRE_JOB_ID", "GYRE_TIMEOUT_MS", "GYRE_TRANSPORT", "GYRE_IFACE",
        "GYRE_DEBUG_COLLECTIVES", "GYRE_LOG_LEVEL", "GYRE_COST_MODEL", "GYRE_SPIN_US", "GYRE_SHM_RING_BYTES",
        "GYRE_PS_SERVERS", "GYRE_PS_SERVER_INDEX"})
    EXPECT_EQ(names.count(required), 1u) << required;
  EXPECT_THROW(knob("GYRE_NOT_A_KNOB"), InvalidArgument);
}

TEST(Config, DefaultsApplyWhenUnsetOrEmpty) {
  const Env empty;
  EXPECT_EQ(getInt(empty, "GYRE_TIMEOUT_MS"), 60000);
  EXPECT_EQ(getInt(empty, "GYRE_SPIN_US"), 50);
  EXPECT_EQ(getInt(empty, "GYRE_SHM_RING_BYTES"), 4194304);
  EXPECT_EQ(getChoice(empty, "GYRE_TRANSPORT"), "auto");
  EXPECT_FALSE(getBool(empty, "GYRE_DEBUG_COLLECTIVES"));
  EXPECT_EQ(getString(empty, "GYRE_IFACE"), "");
  EXPECT_FALSE(getOptionalInt(empty, "GYRE_RANK").has_value());
  EXPECT_FALSE(getCostModel(empty).has_value());
  EXPECT_FALSE(isSet({{"GYRE_IFACE", ""}}, "GYRE_IFACE"));
  EXPECT_EQ(getInt({{"GYRE_TIMEOUT_MS", ""}}, "GYRE_TIMEOUT_MS"), 60000);
  EXPECT_THROW(getInt(empty, "GYRE_RANK"), InvalidArgument);  // no default
}

TEST(Config, TypedValuesParse) {
  const Env env{{"GYRE_TIMEOUT_MS", " 1500 "},
                {"GYRE_TRANSPORT", "SHM"},
                {"GYRE_DEBUG_COLLECTIVES", "yes"},
                {"GYRE_RANK", "7"},
                {"GYRE_IFACE", "eth0"},
                {"GYRE_COST_MODEL", "2.5, 10,20.5"}};
  EXPECT_EQ(getInt(env, "GYRE_TIMEOUT_MS"), 1500);
  EXPECT_EQ(getChoice(env, "GYRE_TRANSPORT"), "shm");
  EXPECT_TRUE(getBool(env, "GYRE_DEBUG_COLLECTIVES"));
  EXPECT_EQ(getOptionalInt(env, "GYRE_RANK"), 7);
  EXPECT_EQ(getString(env, "GYRE_IFACE"), "eth0");
  const auto model = getCostModel(env);
  ASSERT_TRUE(model.has_value());
  EXPECT_DOUBLE_EQ(model->alphaUs, 2.5);
  EXPECT_DOUBLE_EQ(model->betaGBps, 10);
  EXPECT_DOUBLE_EQ(model->gammaGBps, 20.5);
  for (const char* t : {"1", "true", "ON", "Yes"}) EXPECT_EQ(parseBool(t), true) << t;
  for (const char* f : {"0", "false", "off", "NO"}) EXPECT_EQ(parseBool(f), false) << f;
  EXPECT_FALSE(parseBool("2").has_value());
}

TEST(Config, MalformedValuesThrowNamingTheKnob) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"GYRE_TIMEOUT_MS", "soon"},           {"GYRE_TIMEOUT_MS", "0"},
      {"GYRE_TIMEOUT_MS", "12ms"},           {"GYRE_SPIN_US", "-1"},
      {"GYRE_SHM_RING_BYTES", "100"},        {"GYRE_TRANSPORT", "udp"},
      {"GYRE_DEBUG_COLLECTIVES", "maybe"},   {"GYRE_LOG_LEVEL", "loud"},
      {"GYRE_RANK", "99999999999999999999"}, {"GYRE_COST_MODEL", "1,2"},
      {"GYRE_COST_MODEL", "1,x,3"},          {"GYRE_COST_MODEL", "1,0,3"},
  };
  for (const auto& [name, value] : bad) {
    const Env env{{name, value}};
    try {
      const Knob& k = knob(name);
      if (name == "GYRE_COST_MODEL") {
        getCostModel(env);
      } else if (k.type == KnobType::kInt) {
        getInt(env, name);
      } else if (k.type == KnobType::kBool) {
        getBool(env, name);
      } else {
        getChoice(env, name);
      }
      ADD_FAILURE() << name << "=" << value << " accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(getBool({}, "GYRE_TIMEOUT_MS"), InvalidArgument);  // wrong type
}

TEST(Config, FormatsListEveryKnob) {
  const std::string md = formatMarkdown(), text = formatText();
  for (const Knob& k : knobs()) {
    std::string quoted = "`";
    quoted += k.name;
    quoted += '`';
    EXPECT_NE(md.find(quoted), std::string::npos) << k.name;
    EXPECT_NE(text.find(std::string(k.name)), std::string::npos) << k.name;
  }
}

TEST(Config, CheckValueSaysWhatTheGetterWouldReject) {
  const Env env = {
      {"GYRE_TIMEOUT_MS", "12x"},      {"GYRE_SPIN_US", "-1"},      {"GYRE_DEBUG_COLLECTIVES", "maybe"},
      {"GYRE_TRANSPORT", "SHM"},       {"GYRE_LOG_LEVEL", "loud"},  {"GYRE_COST_MODEL", "1,2"},
      {"GYRE_SHM_RING_BYTES", "8192"}, {"GYRE_SECRET", "anything"}, {"GYRE_IFACE", ""}};
  EXPECT_EQ(checkValue(env, "GYRE_TIMEOUT_MS"), "GYRE_TIMEOUT_MS='12x' is not an integer");
  EXPECT_NE(checkValue(env, "GYRE_SPIN_US").find("out of range"), std::string::npos);
  EXPECT_NE(checkValue(env, "GYRE_DEBUG_COLLECTIVES").find("not a boolean"), std::string::npos);
  EXPECT_EQ(checkValue(env, "GYRE_TRANSPORT"), "");  // choices are case-insensitive
  EXPECT_NE(checkValue(env, "GYRE_LOG_LEVEL").find("not one of"), std::string::npos);
  EXPECT_NE(checkValue(env, "GYRE_COST_MODEL").find("2 fields"), std::string::npos);
  EXPECT_EQ(checkValue(env, "GYRE_SHM_RING_BYTES"), "");
  EXPECT_EQ(checkValue(env, "GYRE_SECRET"), "");
  EXPECT_EQ(checkValue(env, "GYRE_IFACE"), "");  // empty counts as unset
  EXPECT_EQ(checkValue(env, "GYRE_RANK"), "");   // unset
  EXPECT_THROW(checkValue(env, "GYRE_NOT_A_KNOB"), InvalidArgument);
}

TEST(Config, FormatTextShowsValuesSetAndMarksInvalidOnes) {
  const std::string text = formatText({{"GYRE_TIMEOUT_MS", "5000"}, {"GYRE_SPIN_US", "soon"}});
  EXPECT_NE(text.find("= 5000  (environment)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("= soon  (environment)  INVALID: GYRE_SPIN_US='soon' is not an integer"), std::string::npos)
      << text;
  EXPECT_NE(text.find("= 4194304  (default)"), std::string::npos) << text;  // GYRE_SHM_RING_BYTES
  EXPECT_NE(text.find("unset  (default)"), std::string::npos) << text;      // GYRE_RANK
  const std::string defaults = formatText();
  EXPECT_EQ(defaults.find("(environment)"), std::string::npos);
  std::size_t lines = 0;
  for (std::size_t at = defaults.find("(default)"); at != std::string::npos; at = defaults.find("(default)", at + 1))
    ++lines;
  EXPECT_EQ(lines, knobs().size());
}

TEST(Config, CheckEnvironmentRefusesTheFirstBadValueByName) {
  EXPECT_NO_THROW(checkEnvironment({}));
  EXPECT_NO_THROW(checkEnvironment({{"GYRE_LOG_LEVEL", "DEBUG"}, {"GYRE_TRANSPORT", "Tcp"}, {"OTHER", "x"}}));
  try {
    checkEnvironment({{"GYRE_LOG_LEVEL", "verbose"}, {"GYRE_TIMEOUT_MS", "5000"}});
    FAIL() << "GYRE_LOG_LEVEL=verbose was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), "GYRE_LOG_LEVEL='verbose' is not one of error|warn|info|debug");
  }
  EXPECT_THROW(checkEnvironment({{"GYRE_NUM_THREADS", "0x2"}}), InvalidArgument);
  EXPECT_THROW(checkEnvironment({{"GYRE_PS_SERVERS", "0"}}), InvalidArgument);
  EXPECT_THROW(checkEnvironment({{"GYRE_COST_MODEL", "1,2"}}), InvalidArgument);
}

TEST(Config, LogLevelIsReadCaseInsensitively) {
  EXPECT_EQ(getChoice({{"GYRE_LOG_LEVEL", "Info"}}, "GYRE_LOG_LEVEL"), "info");
  EXPECT_EQ(getChoice({}, "GYRE_LOG_LEVEL"), "warn");
}

TEST(Config, LauncherSetKnobsAreMarked) {
  for (const char* name : {"GYRE_RANK", "GYRE_WORLD_SIZE", "GYRE_SECRET", "GYRE_NUM_THREADS", "GYRE_PS_SERVERS"})
    EXPECT_EQ(knob(name).origin, KnobOrigin::kLauncher) << name;
  for (const char* name : {"GYRE_TIMEOUT_MS", "GYRE_LOG_LEVEL", "GYRE_TRANSPORT", "GYRE_TIMELINE"})
    EXPECT_EQ(knob(name).origin, KnobOrigin::kUser) << name;
}

// docs/configuration.md shows the table as formatMarkdown() prints it.
TEST(Config, DocumentationHoldsTheTable) {
  std::ifstream in(test::sourceDir() + "/docs/configuration.md");
  ASSERT_TRUE(in) << "docs/configuration.md is missing";
  std::ostringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  EXPECT_NE(doc.find(formatMarkdown()), std::string::npos)
      << "docs/configuration.md's table is out of date; replace it with:\n" << formatMarkdown();
}

// Every GYRE_* variable is read through the table: no source file but config.cc calls getenv
// with a GYRE_ name (the table's typed getters read an Env built once from the environment).
TEST(Config, NoSourceReadsAGyreVariableOutsideTheTable) {
  namespace fs = std::filesystem;
  const fs::path root = test::sourceDir();
  ASSERT_TRUE(fs::is_directory(root / "src")) << root;
  std::vector<std::string> offenders;
  std::size_t scanned = 0;
  for (const char* dir : {"src", "apps", "include", "bench", "examples"}) {
    if (!fs::is_directory(root / dir)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / dir)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".cc" && ext != ".h" && ext != ".c")) continue;
      ++scanned;
      if (entry.path() == root / "src/common/config.cc") continue;
      std::ifstream in(entry.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n)
        if (line.find("getenv(\"GYRE_") != std::string::npos)
          offenders.push_back(fs::relative(entry.path(), root).string() + ":" + std::to_string(n));
    }
  }
  EXPECT_GT(scanned, 100u);
  EXPECT_TRUE(offenders.empty()) << "read GYRE_* through gyre::config (src/common/config.h): "
                                 << ::testing::PrintToString(offenders);
}

}  // namespace
}  // namespace gyre::config
