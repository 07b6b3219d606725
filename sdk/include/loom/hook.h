/* loom/hook.h: the hook kind (torch-free). Hooks see training events in manifest order, read
 * a state view and may steer the run through a small control block.
 *
 *   static const loom_hook_vtable vt = { .struct_size = sizeof(loom_hook_vtable),
 *                                        .create = my_create, .destroy = my_destroy,
 *                                        .on_event = my_on_event };
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
  LOOM_EVENT_EPOCH_BEGIN = 2,           /* (ABI 1.2) right after EPOCH_END: the next epoch starts */
  LOOM_EVENT_EPOCH_END = 3,             /* (ABI 1.2) a finite dataset ended an epoch (loom_batch
                                           end_of_epoch), in the step that drew past it; endless
                                           datasets never end one */
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
  int64_t step;          /* optimizer steps completed. STEP_BEGIN, AFTER_BACKWARD and
                            BEFORE_OPTIMIZER_STEP belong to step + 1; from STEP_END on (EVAL_END,
                            LOG, SAVE) the step just run is counted */
  int64_t total_steps;
  int64_t epoch;         /* epochs the dataset has ended so far; 0 with endless datasets */
  double loss;           /* mean loss per token of the current step; NaN in a step's events
                            before LOG unless a hook says it reads them (loom_hook_needs_args) */
  double grad_norm;      /* global norm before clipping; known as loss is */
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
  int32_t request_eval;  /* (ABI 1.1) evaluate on [eval_data] after this step; EVAL_END follows */
  int32_t request_rollback; /* (ABI 1.1) restore the newest checkpoint's weights and optimizer
                               state after this step and go on with fresh data (LOAD follows) */
} loom_control;

/* (ABI 1.9) What a hook reads, asked once after create. The host fills struct_size and the
 * defaults; the hook sets the fields it knows. */
typedef struct loom_hook_needs_args {
  size_t struct_size;
  int32_t step_values; /* 1 (the default): the hook reads loss and grad_norm in AFTER_BACKWARD,
                          BEFORE_OPTIMIZER_STEP or STEP_END of every step, so every step waits
                          for the device to hand them over. 0: it reads them only in LOG and the
                          events after it (EVAL_END, SAVE, TRAIN_END), where they are always
                          known; elsewhere they are NaN on steps that do not log. */
} loom_hook_needs_args;

typedef struct loom_hook_vtable {
  size_t struct_size;
  /* Required */
  loom_status* (*create)(const loom_context* context, const loom_config* config,
                         loom_hook** out);        /* out: destroy with destroy */
  void (*destroy)(loom_hook* hook);               /* accepts NULL */
  loom_status* (*on_event)(loom_hook* hook, loom_event event, const loom_state_view* state,
                           loom_control* control);
  /* Optional (ABI 1.1): state kept in checkpoints (e.g. early_stop's best value). */
  loom_status* (*state_save)(loom_hook* hook, const loom_byte_writer* writer);
  loom_status* (*state_load)(loom_hook* hook, const void* data, size_t size); /* borrowed */
  /* Optional (ABI 1.9): what the hook reads (loom_hook_needs_args). A hook without it (built
     before 1.9) is taken to read every step's values. */
  loom_status* (*needs)(loom_hook* hook, loom_hook_needs_args* args);
} loom_hook_vtable;

LOOM_ABI_OFFSET(loom_state_view, metrics, 8);
LOOM_ABI_OFFSET(loom_control, skip_step, 2);
LOOM_ABI_OFFSET_BYTES(loom_control, request_eval, 20);
LOOM_ABI_OFFSET_BYTES(loom_control, request_rollback, 24);
LOOM_ABI_OFFSET(loom_hook_vtable, on_event, 3);
LOOM_ABI_OFFSET(loom_hook_vtable, state_load, 5);
LOOM_ABI_OFFSET(loom_hook_vtable, needs, 6);
LOOM_ABI_OFFSET_BYTES(loom_hook_needs_args, step_values, 8);

#ifdef __cplusplus
}
#endif
#endif
