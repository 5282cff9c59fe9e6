// The gyre command-line tool. Each subcommand lives in its own file and registers itself here.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "bench.h"
#include "common/config.h"
#include "data.h"
#include "gyre/errors.h"
#include "gyre/init.h"
#include "gyre/version.h"
#include "info.h"
#include "ps_server.h"
#include "report.h"
#include "run.h"
#include "train.h"
#include "rl.h"
#include "serve.h"
#include "tune.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  std::function<int()> action;

  CLI::App app{"gyre: distributed training of neural networks, and its communication library"};
  app.set_version_flag("--version", std::string("gyre ") + gyre::kVersion);
  app.require_subcommand(1);
  app.footer("Run `gyre COMMAND --help` for a command's options. Documentation: docs/README.md");

  gyre::app::addBench(app, action, args);  // bench/cli/
  gyre::app::addData(app, action);
  gyre::app::addInfo(app, action);
  gyre::app::addReport(app, action);
  gyre::app::addRun(app, action);
  gyre::app::addTrain(app, action);
  gyre::app::addRl(app, action);
  gyre::app::addServe(app, action);
  // `gyre tune ... -- COMMAND`: the trial command is not gyre's to parse.
  std::vector<std::string> tuneCommand;
  int parsedArgc = argc;
  if (argc > 1 && std::string(argv[1]) == "tune")
    for (int i = 2; i < argc; ++i)
      if (std::string(argv[i]) == "--") {
        tuneCommand.assign(argv + i + 1, argv + argc);
        parsedArgc = i;
        break;
      }
  gyre::app::addTune(app, action, tuneCommand);
  gyre::app::addPsServer(app, action);  // started by gyre run --servers; not in --help

  // mpirun and horovodrun users type -np; CLI11 knows long options by their double dash.
  std::vector<char*> argvFixed(argv, argv + argc);
  static char np[] = "--np";
  for (int i = 1; i < argc && std::string(argv[i]) != "--"; ++i)
    if (std::string(argv[i]) == "-np") argvFixed[i] = np;
  try {
    app.parse(parsedArgc, argvFixed.data());
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every mistake on the command line exits 2.
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (!action) return 0;
  try {
    // A malformed GYRE_* value stops every command but `gyre info`, which shows it marked.
    if (!app.got_subcommand("info")) gyre::config::checkEnvironment(gyre::config::processEnvironment());
    return action();
  } catch (const gyre::InvalidArgument& e) {
    fmt::print(stderr, "gyre: invalid argument: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "gyre: error: {}\n", e.what());
    return 1;
  }
}
