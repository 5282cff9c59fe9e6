// The launcher's process helpers, under the names the bench commands use.
#pragma once

#include "launcher/process.h"

namespace gyre::app {
using launcher::ChildExit;
using launcher::ChildSpec;
using launcher::findExecutable;
using launcher::installInterruptHandlers;
using launcher::interruptSignal;
using launcher::ProcessGroup;
using launcher::selfExecutable;
using launcher::supervise;
using launcher::SuperviseResult;
}  // namespace gyre::app
