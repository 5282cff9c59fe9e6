// gyre::rt, the task and actor runtime: remote functions, stateful actors and futures.
#pragma once

#include "gyre/rt/future.h"
#include "gyre/rt/object_ref.h"
#include "gyre/rt/registry.h"
#include "gyre/rt/runtime.h"
#include "gyre/rt/serialize.h"
