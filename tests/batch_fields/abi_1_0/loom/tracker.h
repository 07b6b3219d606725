/* loom/tracker.h: the experiment-tracker kind (torch-free). Rank 0 hands every tracker the
 * reduced metrics every run.log_every steps.
 *
 *   static const loom_tracker_vtable vt = { sizeof(loom_tracker_vtable), my_create,
 *                                           my_destroy, my_log };
 */
#ifndef LOOM_TRACKER_H
#define LOOM_TRACKER_H
#include "core.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_tracker loom_tracker; /* plugin-defined */

typedef struct loom_metric {
  size_t struct_size;
  const char* name; /* owned by the host; borrowed for the call: "loss", "lr", "tokens_per_s" */
  double value;
} loom_metric;

typedef struct loom_metrics {
  size_t struct_size;
  int64_t step;                      /* optimizer steps completed */
  const loom_metric* const* items;   /* borrowed for the call; count pointers */
  size_t count;
} loom_metrics;

typedef struct loom_tracker_vtable {
  size_t struct_size;
  /* Required */
  loom_status* (*create)(const loom_context* context, const loom_config* config,
                         loom_tracker** out);     /* out: destroy with destroy */
  void (*destroy)(loom_tracker* tracker);         /* accepts NULL; flush and close here */
  loom_status* (*log)(loom_tracker* tracker, const loom_metrics* metrics);
  /* Optional: a line of text for humans (e.g. "resumed from step-40"); borrowed for the call */
  loom_status* (*note)(loom_tracker* tracker, const char* text);
} loom_tracker_vtable;

LOOM_ABI_OFFSET(loom_metric, value, 2);
LOOM_ABI_OFFSET(loom_metrics, count, 3);
LOOM_ABI_OFFSET(loom_tracker_vtable, log, 3);
LOOM_ABI_OFFSET(loom_tracker_vtable, note, 4);

#ifdef __cplusplus
}
#endif
#endif
