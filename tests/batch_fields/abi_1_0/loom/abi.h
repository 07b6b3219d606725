/* loom/abi.h: the whole Loom plugin C ABI. Pure C (C99 and C++17). Include this, or only the
 * kind headers you need. docs/abi.md explains the rules; each header opens with an example. */
#ifndef LOOM_ABI_H
#define LOOM_ABI_H
#include "core.h"
#include "model.h"
#include "dataset.h"
#include "optimizer.h"
#include "schedule.h"
#include "checkpoint.h"
#include "tracker.h"
#include "hook.h"
#endif
