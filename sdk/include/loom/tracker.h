/* loom/tracker.h: the experiment-tracker kind (torch-free). Rank 0 hands every tracker the
 * reduced metrics every run.log_every steps. Trackers exist on rank 0 only, unless the
 * manifest sets `every_rank = true` in the tracker's table: then each rank creates and calls
 * its own (context->rank says which) with the same reduced metrics.
 *
 *   static const loom_tracker_vtable vt = { .struct_size = sizeof(loom_tracker_vtable),
 *                                           .create = my_create, .destroy = my_destroy,
 *                                           .log = my_log };
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

/* ABI 1.6: how a run ended, for loom_tracker_vtable.finish. */
typedef enum loom_run_outcome {
  LOOM_RUN_FINISHED = 1,    /* reached its last step, or a hook stopped it (early stopping) */
  LOOM_RUN_INTERRUPTED = 2, /* stopped by a signal (SIGTERM, Ctrl-C) after saving; resumable */
  LOOM_RUN_FAILED = 3       /* ended by an error, training divergence included; see message */
} loom_run_outcome;

typedef struct loom_tracker_finish_args {
  size_t struct_size;  /* set by the host */
  int32_t outcome;     /* loom_run_outcome */
  int64_t step;        /* optimizer steps completed */
  const char* message; /* borrowed for the call; "" unless the run failed */
} loom_tracker_finish_args;

typedef struct loom_tracker_vtable {
  size_t struct_size;
  /* Required */
  loom_status* (*create)(const loom_context* context, const loom_config* config,
                         loom_tracker** out);     /* out: destroy with destroy */
  void (*destroy)(loom_tracker* tracker);         /* accepts NULL; flush and close here */
  loom_status* (*log)(loom_tracker* tracker, const loom_metrics* metrics);
  /* Optional: a line of text for humans (e.g. "resumed from step-40"); borrowed for the call */
  loom_status* (*note)(loom_tracker* tracker, const char* text);
  /* Optional (ABI 1.1): the run resumed at `step`; whatever this tracker recorded for later steps
     (by an interrupted run) must be dropped or superseded, so no output repeats or goes back. */
  loom_status* (*resume)(loom_tracker* tracker, int64_t step);
  /* Optional (ABI 1.1): state kept in checkpoints, restored before resume. */
  loom_status* (*state_save)(loom_tracker* tracker, const loom_byte_writer* writer);
  loom_status* (*state_load)(loom_tracker* tracker, const void* data, size_t size); /* borrowed */
  /* Optional (ABI 1.6): the run ended (called once, before destroy; not called when the
     process is killed). A tracker records the outcome, e.g. a run's status. */
  loom_status* (*finish)(loom_tracker* tracker, const loom_tracker_finish_args* args);
} loom_tracker_vtable;

LOOM_ABI_OFFSET(loom_metric, value, 2);
LOOM_ABI_OFFSET(loom_metrics, count, 3);
LOOM_ABI_OFFSET(loom_tracker_vtable, log, 3);
LOOM_ABI_OFFSET(loom_tracker_vtable, note, 4);
LOOM_ABI_OFFSET(loom_tracker_vtable, resume, 5);
LOOM_ABI_OFFSET(loom_tracker_vtable, state_load, 7);
LOOM_ABI_OFFSET(loom_tracker_vtable, finish, 8);
LOOM_ABI_OFFSET(loom_tracker_finish_args, outcome, 1);
LOOM_ABI_OFFSET(loom_tracker_finish_args, step, 2);
LOOM_ABI_OFFSET(loom_tracker_finish_args, message, 3);

#ifdef __cplusplus
}
#endif
#endif
