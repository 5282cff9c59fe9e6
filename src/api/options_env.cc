#include "api/options_env.h"

namespace gyre {

void applyKnobs(const config::Env& env, CommunicatorOptions& options) {
  if (config::isSet(env, "GYRE_TIMEOUT_MS"))
    options.timeout = std::chrono::milliseconds(config::getInt(env, "GYRE_TIMEOUT_MS"));
  // The knob's default (30 s) applies under every launcher unless the caller chose a start time-out.
  if (config::isSet(env, "GYRE_START_TIMEOUT_MS") || options.startTimeout.count() == 0)
    options.startTimeout = std::chrono::milliseconds(config::getInt(env, "GYRE_START_TIMEOUT_MS"));
  if (config::isSet(env, "GYRE_TRANSPORT"))
    options.transport = parseTransport(config::getChoice(env, "GYRE_TRANSPORT"));
  if (config::isSet(env, "GYRE_IFACE")) options.interface = config::getString(env, "GYRE_IFACE");
  if (config::isSet(env, "GYRE_DEBUG_COLLECTIVES"))
    options.debugCollectives = config::getBool(env, "GYRE_DEBUG_COLLECTIVES");
  if (config::isSet(env, "GYRE_SPIN_US"))
    options.spinMicros = static_cast<int>(config::getInt(env, "GYRE_SPIN_US"));
  if (config::isSet(env, "GYRE_SHM_RING_BYTES"))
    options.shmRingBytes = static_cast<std::size_t>(config::getInt(env, "GYRE_SHM_RING_BYTES"));
  if (config::isSet(env, "GYRE_COST_MODEL")) {
    config::getCostModel(env);  // validates
    options.costModel = config::getString(env, "GYRE_COST_MODEL");
  }
}

}  // namespace gyre
