// Example files that the documentation shows whole must be shown as they are: a change to one
// without the other fails here.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "support/jobs.h"

namespace gyre {
namespace {

std::string read(const std::string& relative) {
  std::ifstream in(test::sourceDir() + "/" + relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(DocsExamples, LaunchingShowsTheSlurmBatchScriptAsItIs) {
  const std::string script = read("examples/slurm/train.sbatch");
  ASSERT_FALSE(script.empty());
  EXPECT_NE(read("docs/launching.md").find("```sh\n" + script + "```\n"), std::string::npos)
      << "docs/launching.md must show examples/slurm/train.sbatch whole, in a ```sh block";
}

}  // namespace
}  // namespace gyre
