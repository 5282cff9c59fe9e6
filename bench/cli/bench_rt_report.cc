#include "bench_rt_report.h"

#include <fmt/format.h>

#include <algorithm>

namespace gyre::app {

void setRtTargets(std::vector<RtRow>& rows) {
  double memcpyGbPerS = 0;
  for (const RtRow& r : rows)
    if (r.name == "memcpy 100 MB") memcpyGbPerS = r.perSecond;
  for (RtRow& r : rows) {
    if (r.name == "single client tasks sync" || r.name == "1:1 actor calls sync") r.target = 20000;
    if (r.name == "single client tasks async") r.target = 100000;
    if (r.name.ends_with("100 MB (shared memory)")) r.target = memcpyGbPerS / 2;
  }
}

std::vector<RtRow> medianOfRounds(const std::vector<std::vector<RtRow>>& rounds) {
  std::vector<RtRow> rows = rounds.at(0);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::vector<double> values;
    for (const std::vector<RtRow>& round : rounds)
      if (i < round.size()) values.push_back(round[i].perSecond);
    std::sort(values.begin(), values.end());
    rows[i].perSecond = values[values.size() / 2];
  }
  return rows;
}

std::string rtTable(const RtBenchSettings& s, const std::vector<RtRow>& rows, unsigned hardwareThreads) {
  std::string out = fmt::format(
      "gyre bench rt: {} s per row, median of {} round(s), {} threads per process, {} hardware threads\n",
      s.seconds, s.repeat, s.threads, hardwareThreads);
  out += fmt::format("{:<30} {:<32} {:>14}  {}\n", "benchmark", "where", "per second", "target");
  for (const RtRow& r : rows) {
    const bool bytes = r.name.find("100 MB") != std::string::npos;  // GB/s; the others count calls or steps
    const std::string target = bytes ? fmt::format("{:.2f} GB", r.target) : fmt::format("{:.0f}", r.target);
    out += fmt::format("{:<30} {:<32} {:>14}  {}\n", r.name, r.where,
                       bytes ? fmt::format("{:.2f} GB", r.perSecond) : fmt::format("{:.0f}", r.perSecond),
                       r.target > 0 ? fmt::format("{} {}", r.perSecond >= r.target ? "PASS" : "MISS", target)
                       : r.receivedMb >= 0 ? fmt::format("its host received {:.1f} MB", r.receivedMb)
                                           : "");
  }
  return out;
}

nlohmann::json rtRowJson(const RtRow& r, const RtBenchSettings& s, unsigned hardwareThreads) {
  return {{"benchmark", r.name},
          {"where", r.where},
          {"per_s", r.perSecond},
          {"target_per_s", r.target > 0 ? nlohmann::json(r.target) : nlohmann::json()},
          {"threads", r.threads > 0 ? r.threads : s.threads},
          {"received_mb", r.receivedMb >= 0 ? nlohmann::json(r.receivedMb) : nlohmann::json()},
          {"repeat", s.repeat},
          {"hardware_threads", hardwareThreads}};
}

}  // namespace gyre::app
