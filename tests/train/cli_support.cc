#include "train/cli_support.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "gyre/torch/data.h"
#include "support/jobs.h"

namespace gyre::train::cli {

std::string trainWorker() {
  return test::binDir() + "/gyre_train_worker";
}

bool haveTrainer() {
  return ::access(gyreTool().c_str(), X_OK) == 0 && ::access(trainWorker().c_str(), X_OK) == 0;
}

bool haveData() {
  return std::filesystem::exists(std::string(gyre::data::kFashionMnistDir) + "/train-images-idx3-ubyte.gz");
}

std::vector<std::string> lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

std::vector<nlohmann::json> jsonLines(const std::string& path) {
  std::vector<nlohmann::json> out;
  for (const std::string& line : lines(path)) out.push_back(nlohmann::json::parse(line));
  return out;
}

test::ProgramRun gyreTrain(std::vector<std::string> args, test::Environment env) {
  args.insert(args.begin(), {gyreTool(), "train"});
  return test::runProgram({std::move(args), std::move(env)}, kTrainTimeout);
}

test::ProgramRun checkpointedRun(const std::string& runDir, const std::string& checkpointDir, int np,
                                 const std::vector<std::string>& more, const std::string& batch) {
  std::vector<std::string> argv = {gyreTool(),
                                   "train",
                                   "--model",
                                   "mlp",
                                   "--np",
                                   std::to_string(np),
                                   "--epochs",
                                   "2",
                                   "--max-steps",
                                   "12",
                                   "--batch",
                                   batch,
                                   "--threads",
                                   "1",
                                   "--no-eval",
                                   "--progress",
                                   "off",
                                   "--lr-schedule",
                                   "cosine",
                                   "--run-dir",
                                   runDir,
                                   "--checkpoint-dir",
                                   checkpointDir,
                                   "--checkpoint-every",
                                   "5"};
  argv.insert(argv.end(), more.begin(), more.end());
  return test::runProgram({argv, test::cleanEnvironment()}, kTrainTimeout);
}

}  // namespace gyre::train::cli
