#include "report.h"

#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/check.h"
#include "report/figures.h"
#include "report/page.h"
#include "report/run_data.h"

namespace gyre::app {
namespace {

struct ReportFlags {
  std::vector<std::string> runs;
  std::vector<std::string> bench;
  std::string output;
  std::string title;
  bool noPng = false;
};

int runReport(const ReportFlags& f) {
  GYRE_USAGE_CHECK(!f.runs.empty() || !f.bench.empty(), "give at least one run directory (or --bench FILE)");
  std::vector<report::Run> runs;
  for (const std::string& dir : f.runs) runs.push_back(report::loadRun(dir));
  std::vector<report::BenchSeries> bench;
  for (const std::string& file : f.bench) {
    std::vector<report::BenchSeries> more = report::loadBench(file);
    bench.insert(bench.end(), more.begin(), more.end());
  }
  // One run: its own directory; several: here.
  std::string output = f.output;
  if (output.empty())
    output = runs.size() == 1 ? (std::filesystem::path(runs[0].dir) / "report.html").string() : "report.html";
  std::string title = f.title;
  if (title.empty()) {
    title = "gyre report: ";
    for (std::size_t i = 0; i < runs.size() && i < 4; ++i) title += (i ? ", " : "") + runs[i].name;
    if (runs.size() > 4) title += fmt::format(" and {} more", runs.size() - 4);
    if (runs.empty()) title += "collectives";
  }
  const std::filesystem::path parent = std::filesystem::path(output).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  GYRE_USAGE_CHECK(!ec, "-o ", output, ": cannot make ", parent.string(), ": ", ec.message());
  const std::vector<report::Figure> figures = report::figures(runs, bench);
  const report::Written w = report::write(output, title, runs, figures, !f.noPng);
  fmt::print("{}: {} figure{}\n", w.html, figures.size(), figures.size() == 1 ? "" : "s");
  for (const std::string& png : w.pngs) fmt::print("{}\n", png);
  if (!w.pngNote.empty()) fmt::print(stderr, "gyre report: {}\n", w.pngNote);
  return 0;
}

}  // namespace

void addReport(CLI::App& app, std::function<int()>& action) {
  auto f = std::make_shared<ReportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Draw one run or a comparison of runs as a self-contained HTML page with plots (and PNGs)");
  cmd->footer(
      "Reads each RUN_DIR of gyre train (metrics.jsonl, steps.jsonl, progress.jsonl, config.json) and\n"
      "draws loss and test accuracy against steps and seconds, samples/s, where a step's time goes, each\n"
      "rank's step times (stragglers) and, for parameter-server modes, staleness. Runs at several worker\n"
      "counts, one of them 1, also get speedup S(W) and efficiency E(W) with the ideal line and Amdahl's\n"
      "fit (its serial fraction). --bench adds `gyre bench collectives --json` output: bus bandwidth\n"
      "against message size, with OpenMPI's where it was measured (--baseline mpi). Each figure is also\n"
      "written as OUT-ID.png beside the page (rsvg-convert, Debian's librsvg2-bin). See docs/report.md.\n\n"
      "Examples:\n"
      "  gyre report runs/mlp-np2-20261126-101500\n"
      "  gyre report runs/mlp-np1-* runs/mlp-np2-* runs/mlp-np4-* -o scaling.html\n"
      "  gyre bench collectives --np 2 --algo all --baseline mpi --json > coll.jsonl\n"
      "  gyre report --bench coll.jsonl -o collectives.html");
  cmd->add_option("runs", f->runs, "Run directories of gyre train");
  cmd->add_option("--bench", f->bench, "Output of `gyre bench collectives --json` (repeatable)")
      ->allow_extra_args(false)
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option(
      "-o,--output", f->output,
      "The HTML file to write (default: RUN_DIR/report.html for one run, ./report.html for several)");
  cmd->add_option("--title", f->title, "The page's title (default: the runs' names)");
  cmd->add_flag("--no-png", f->noPng, "Write the HTML page only");
  cmd->callback([f, &action] { action = [f] { return runReport(*f); }; });
}

}  // namespace gyre::app
