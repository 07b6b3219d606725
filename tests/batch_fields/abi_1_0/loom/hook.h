/* loom/hook.h: the hook kind (torch-free). Hooks see training events in manifest order, read
 * a state view and may steer the run through a small control block.
 *
 *   static const loom_hook_vtable vt = { sizeof(loom_hook_vtable), my_create, my_destroy,
 *                                        my_on_event };
 */
#ifndef LOOM_HOOK_H
#define LOOM_HOOK_H
#include "core.h"
#include "tracker.h"
#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_hook loom_hook; /* plugin-defined */

/* Stable event set; values never change, new events are appended. */
typedef enum loom_event {
  LOOM_EVENT_TRAIN_BEGIN = 0,
  LOOM_EVENT_TRAIN_END = 1,
  LOOM_EVENT_EPOCH_BEGIN = 2,
  LOOM_EVENT_EPOCH_END = 3,
  LOOM_EVENT_STEP_BEGIN = 4,
  LOOM_EVENT_AFTER_BACKWARD = 5,        /* loss known, gradients accumulated */
  LOOM_EVENT_BEFORE_OPTIMIZER_STEP = 6, /* after clipping; grad_norm known */
  LOOM_EVENT_STEP_END = 7,
  LOOM_EVENT_LOG = 8,                   /* metrics holds the reduced metrics */
  LOOM_EVENT_EVAL_END = 9,
  LOOM_EVENT_SAVE = 10,
  LOOM_EVENT_LOAD = 11,
  LOOM_EVENT_EXCEPTION = 12,            /* message holds the error; the run is ending */
  LOOM_EVENT_COUNT_ = 13
} loom_event;

/* Read-only; borrowed for the call. Values not yet known in an event are NaN or 0. */
typedef struct loom_state_view {
  size_t struct_size;
  int64_t step;          /* optimizer steps completed before this step (STEP_* events: the
                            current step is step + 1) */
  int64_t total_steps;
  int64_t epoch;
  double loss;           /* mean loss per token of the current step */
  double grad_norm;      /* global norm before clipping */
  double lr;
  int64_t tokens;        /* tokens with loss seen so far, all ranks */
  const loom_metrics* metrics; /* may be NULL; set for LOG and EVAL_END */
  const char* run_dir;
  int32_t rank;
  int32_t world_size;
  const char* message;   /* may be NULL; set for EXCEPTION */
} loom_state_view;

/* Writable; borrowed for the call. The host reads it after every hook has run. */
typedef struct loom_control {
  size_t struct_size;
  int32_t request_stop;  /* end the run gracefully after this step */
  int32_t request_save;  /* save a checkpoint at the next step boundary */
  int32_t skip_step;     /* BEFORE_OPTIMIZER_STEP: drop this step's update */
} loom_control;

typedef struct loom_hook_vtable {
  size_t struct_size;
  /* Required */
  loom_status* (*create)(const loom_context* context, const loom_config* config,
                         loom_hook** out);        /* out: destroy with destroy */
  void (*destroy)(loom_hook* hook);               /* accepts NULL */
  loom_status* (*on_event)(loom_hook* hook, loom_event event, const loom_state_view* state,
                           loom_control* control);
} loom_hook_vtable;

LOOM_ABI_OFFSET(loom_state_view, metrics, 8);
LOOM_ABI_OFFSET(loom_control, skip_step, 2);
LOOM_ABI_OFFSET(loom_hook_vtable, on_event, 3);

#ifdef __cplusplus
}
#endif
#endif
