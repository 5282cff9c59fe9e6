#include "bench_report.h"

#include <fmt/format.h>

namespace gyre::app {

double BenchRow::algbwGBps() const {
  return timeUs > 0 ? static_cast<double>(bytes) / (timeUs * 1e3) : 0.0;
}

double BenchRow::busbwGBps() const {
  return algbwGBps() * busBandwidthFactor(parseBenchOp(op), np);
}

std::optional<double> BenchRow::mpiBusbwGBps() const {
  if (!mpiTimeUs || *mpiTimeUs <= 0) return std::nullopt;
  return static_cast<double>(bytes) / (*mpiTimeUs * 1e3) * busBandwidthFactor(parseBenchOp(op), np);
}

std::optional<double> BenchRow::ratio() const {
  if (!mpiTimeUs || timeUs <= 0) return std::nullopt;
  return *mpiTimeUs / timeUs;
}

nlohmann::json toJson(const BenchRow& r) {
  nlohmann::json j = {
      {"bytes", r.bytes},
      {"count", r.count},
      {"time_us", r.timeUs},
      {"algbw_GBps", r.algbwGBps()},
      {"busbw_GBps", r.busbwGBps()},
      {"op", r.op},
      {"algo", r.algo},
      {"np", r.np},
      {"transport", r.transport},
      {"dtype", r.dtype},
      {"redop", r.redop},
      {"inplace", r.inplace},
      {"iters", r.iters},
  };
  if (r.checkOk) j["check"] = *r.checkOk ? "ok" : "failed";
  if (r.mpiTimeUs) {
    j["mpi_time_us"] = *r.mpiTimeUs;
    j["mpi_busbw_GBps"] = r.mpiBusbwGBps().value_or(0.0);
    j["ratio"] = r.ratio().value_or(0.0);
  }
  return j;
}

BenchRow rowFromJson(const nlohmann::json& j) {
  BenchRow r;
  r.bytes = j.at("bytes").get<std::uint64_t>();
  r.count = j.at("count").get<std::uint64_t>();
  r.timeUs = j.at("time_us").get<double>();
  r.op = j.at("op").get<std::string>();
  r.algo = j.at("algo").get<std::string>();
  r.dtype = j.value("dtype", "");
  r.redop = j.value("redop", "");
  r.transport = j.value("transport", "");
  r.np = j.at("np").get<int>();
  r.inplace = j.value("inplace", true);
  r.iters = j.value("iters", 0);
  if (j.contains("check")) r.checkOk = j["check"] == "ok";
  if (j.contains("mpi_time_us")) r.mpiTimeUs = j["mpi_time_us"].get<double>();
  return r;
}

void addMpiTime(BenchRow& row, const std::map<std::uint64_t, double>& mpiTimeUs) {
  const auto it = mpiTimeUs.find(row.bytes);
  if (it != mpiTimeUs.end()) row.mpiTimeUs = it->second;
}

std::string failedChecksText(std::size_t failedChecks, std::size_t rows) {
  return fmt::format("{} of {} checks FAILED (see the messages above)", failedChecks, rows);
}

std::string sweepShortfall(const BenchOptions& o, std::size_t rows, std::size_t failedChecks) {
  const BenchOp op = parseBenchOp(o.op);
  const std::size_t expected = sweepSizes(o, op).size() * algorithmsToRun(op, o.algo).size();
  if (rows != expected) return fmt::format("the ranks exited after {} of {} results", rows, expected);
  return failedChecks > 0 ? failedChecksText(failedChecks, rows) : "";
}

BenchPrinter::BenchPrinter(const BenchOptions& options, bool withMpi, std::FILE* out)
    : options_(options), withMpi_(withMpi), out_(out) {}

void BenchPrinter::header() {
  if (options_.json) return;
  const std::string iters =
      options_.iters > 0 ? std::to_string(options_.iters) : "50 (<=1 MiB) / 10 (<=16 MiB) / 4";
  fmt::print(out_, "# gyre bench collectives: np={} op={} dtype={} redop={} transport={} inplace={}\n",
             options_.np, options_.op, options_.dtype, options_.redop, options_.transport,
             options_.inplace ? "yes" : "no");
  fmt::print(out_, "# iterations: {}, warmup {}; time = max over ranks of the mean time per call{}\n", iters,
             options_.warmup, withMpi_ ? "; ratio = gyre busbw / OpenMPI busbw (>1: gyre faster)" : "");
  std::string line = fmt::format("{:>12} {:>11}  {:<17}{:>12} {:>11} {:>11}", "bytes", "count", "algo",
                                 "time_us", "algbw_GBps", "busbw_GBps");
  if (withMpi_) line += fmt::format(" {:>12} {:>15} {:>7}", "mpi_time_us", "mpi_busbw_GBps", "ratio");
  if (options_.check) line += fmt::format("  {}", "check");
  fmt::print(out_, "{}\n", line);
  std::fflush(out_);
}

void BenchPrinter::row(const BenchRow& r) {
  if (options_.json) {
    fmt::print(out_, "{}\n", toJson(r).dump());
    std::fflush(out_);
    return;
  }
  std::string line = fmt::format("{:>12} {:>11}  {:<17}{:>12.1f} {:>11.3f} {:>11.3f}", r.bytes, r.count,
                                 r.algo, r.timeUs, r.algbwGBps(), r.busbwGBps());
  if (withMpi_) {
    if (r.mpiTimeUs) {
      line += fmt::format(" {:>12.1f} {:>15.3f} {:>7.2f}", *r.mpiTimeUs, r.mpiBusbwGBps().value_or(0.0),
                          r.ratio().value_or(0.0));
    } else {
      line += fmt::format(" {:>12} {:>15} {:>7}", "-", "-", "-");
    }
  }
  if (r.checkOk) line += fmt::format("  {}", *r.checkOk ? "ok" : "FAILED");
  fmt::print(out_, "{}\n", line);
  std::fflush(out_);
}

}  // namespace gyre::app
