// What gyre tune shows while it runs, as Ray Tune's status table does: the status counts, the
// best trial so far, the compute used, and a row per trial (id, status, parameters, iteration,
// last and best metric, node). On a terminal the table is redrawn in place twice a second, with
// the latest events under it; otherwise every event is a line of its own, and the table is
// printed every 30 s and at the end.
#pragma once

#include <cstdio>
#include <deque>
#include <string>

#include "tune/experiment.h"

namespace gyre::tune {

// "lr=0.0123, batch=64": a configuration in the space's order.
std::string describeConfig(const Space& space, const Json& config);

// The table as text; at most `maxRows` trial rows (running first, then the best), "" for none.
std::string statusTable(const ExperimentSpec& spec, const ExperimentState& state, double elapsedS,
                        const std::string& where, std::size_t maxRows);

class StatusView {
 public:
  StatusView(const ExperimentSpec& spec, std::FILE* out, bool live) : spec_(spec), out_(out), live_(live) {}
  void event(const std::string& line);
  // Draws the table when it is time to (or `force`).
  void draw(const ExperimentState& state, double elapsedS, const std::string& where, bool force = false);
  // The whole table, once, not in place.
  void finish(const ExperimentState& state, double elapsedS, const std::string& where);

 private:
  const ExperimentSpec& spec_;
  std::FILE* out_;
  bool live_;
  std::deque<std::string> recent_;
  int drawnLines_ = 0;
  double lastDraw_ = -1e9;
};

}  // namespace gyre::tune
