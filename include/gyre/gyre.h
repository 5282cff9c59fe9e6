// The whole public API of gyre's communication core.
#pragma once

#include "gyre/communicator.h"
#include "gyre/errors.h"
#include "gyre/init.h"
#include "gyre/store.h"
#include "gyre/tune.h"
#include "gyre/types.h"
#include "gyre/version.h"
#include "gyre/work.h"
