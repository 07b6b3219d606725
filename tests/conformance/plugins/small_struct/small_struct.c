/* small_struct.c: components compiled against an OLDER, shorter version of the ABI structs,
 * written as local truncated copies of the SDK's declarations.
 *   - small_tracker: its vtable lacks the optional `note` tail, so its struct_size is smaller
 *     than the host's loom_tracker_vtable.
 *   - small_hook: it reads the host's loom_state_view and writes the host's loom_control
 *     through shorter "old" declarations of both.
 * Proves rule 3, smaller side: the host accepts a vtable smaller than its own, treats the
 * missing tail as absent (the word right after the short vtable is a poison callback that
 * records any call), and an old plugin works against the host's larger argument structs.
 * Effects the test checks: small_tracker writes one line per logged step, and small_hook
 * stops the run after stop_after steps and records the step at train_end. */
#include <loom/abi.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- The "old" declarations --------------------------------------------------------- */

/* loom_tracker_vtable before `note` was appended. */
typedef struct old_tracker_vtable {
  size_t struct_size;
  loom_status* (*create)(const loom_context* context, const loom_config* config, loom_tracker** out);
  void (*destroy)(loom_tracker* tracker);
  loom_status* (*log)(loom_tracker* tracker, const loom_metrics* metrics);
} old_tracker_vtable;

/* loom_state_view cut after `tokens`; loom_control cut after `request_stop`. */
typedef struct old_state_view {
  size_t struct_size;
  int64_t step;
  int64_t total_steps;
  int64_t epoch;
  double loss;
  double grad_norm;
  double lr;
  int64_t tokens;
} old_state_view;

typedef struct old_control {
  size_t struct_size;
  int32_t request_stop;
} old_control;

typedef struct old_hook_vtable {
  size_t struct_size;
  loom_status* (*create)(const loom_context* context, const loom_config* config, loom_hook** out);
  void (*destroy)(loom_hook* hook);
  loom_status* (*on_event)(loom_hook* hook, loom_event event, const old_state_view* state,
                           old_control* control);
} old_hook_vtable;

/* The point of this plugin: every one of these really is smaller than the host's. */
LOOM_ABI_ASSERT(sizeof(old_tracker_vtable) < sizeof(loom_tracker_vtable));
LOOM_ABI_ASSERT(sizeof(old_state_view) < sizeof(loom_state_view));
LOOM_ABI_ASSERT(sizeof(old_control) < sizeof(loom_control));

static const loom_host_api* host;

/* Opens run_dir/name for writing; NULL with a status in *status on failure. */
static FILE* open_in_run_dir(const loom_context* context, const loom_config* config,
                             loom_status** status) {
  const char* name = NULL;
  const char* run_dir = LOOM_STRUCT_HAS(context, loom_context, run_dir) ? context->run_dir : ".";
  char path[4096];
  FILE* file;
  *status = host->config_get_string(config, "path", &name);
  if (*status != NULL) return NULL;
  snprintf(path, sizeof path, "%s/%s", run_dir, name);
  file = fopen(path, "w");
  if (file == NULL) {
    char message[4200];
    snprintf(message, sizeof message, "cannot open %s: %s", path, strerror(errno));
    *status = host->status_create(LOOM_STATUS_CODE_INVALID_ARGUMENT, message);
  }
  return file;
}

/* ---- small_tracker ------------------------------------------------------------------- */

struct loom_tracker {
  FILE* file;
};

static loom_status* tracker_create(const loom_context* context, const loom_config* config,
                                   loom_tracker** out) {
  loom_status* status = NULL;
  FILE* file = open_in_run_dir(context, config, &status);
  *out = NULL;
  if (file == NULL) return status;
  *out = (loom_tracker*)malloc(sizeof **out);
  if (*out == NULL) {
    fclose(file);
    return host->status_create(LOOM_STATUS_CODE_INTERNAL, "small_tracker: out of memory");
  }
  (*out)->file = file;
  return NULL;
}

static void tracker_destroy(loom_tracker* tracker) {
  if (tracker == NULL) return;
  fclose(tracker->file);
  free(tracker);
}

static loom_status* tracker_log(loom_tracker* tracker, const loom_metrics* metrics) {
  size_t i;
  double loss = -1.0;
  for (i = 0; i < metrics->count; ++i)
    if (strcmp(metrics->items[i]->name, "loss") == 0) loss = metrics->items[i]->value;
  fprintf(tracker->file, "small_tracker step=%lld loss=%.6f\n", (long long)metrics->step, loss);
  fflush(tracker->file);
  return NULL;
}

/* Sits right behind the short vtable: a host that read `note` past struct_size would call it. */
static loom_status* poison_note(loom_tracker* tracker, const char* text) {
  fprintf(tracker->file, "POISON: note read past struct_size (%s)\n", text ? text : "");
  fflush(tracker->file);
  return host->status_create(LOOM_STATUS_CODE_INTERNAL,
                             "small_tracker: the host called a callback beyond the vtable's struct_size");
}

static const struct {
  old_tracker_vtable vtable;
  loom_status* (*beyond_struct_size)(loom_tracker* tracker, const char* text);
} tracker_table = {{sizeof(old_tracker_vtable), tracker_create, tracker_destroy, tracker_log},
                   poison_note};

/* ---- small_hook ---------------------------------------------------------------------- */

struct loom_hook {
  FILE* file;
  int64_t stop_after;
};

static loom_status* hook_create(const loom_context* context, const loom_config* config,
                                loom_hook** out) {
  loom_status* status = NULL;
  int64_t stop_after = 0;
  FILE* file;
  *out = NULL;
  status = host->config_get_int(config, "stop_after", &stop_after);
  if (status != NULL) return status;
  file = open_in_run_dir(context, config, &status);
  if (file == NULL) return status;
  *out = (loom_hook*)malloc(sizeof **out);
  if (*out == NULL) {
    fclose(file);
    return host->status_create(LOOM_STATUS_CODE_INTERNAL, "small_hook: out of memory");
  }
  (*out)->file = file;
  (*out)->stop_after = stop_after;
  return NULL;
}

static void hook_destroy(loom_hook* hook) {
  if (hook == NULL) return;
  fclose(hook->file);
  free(hook);
}

static loom_status* hook_on_event(loom_hook* hook, loom_event event, const old_state_view* state,
                                  old_control* control) {
  /* Receiver side of rule 3: the host's structs are at least as large as these old ones. */
  if (state->struct_size < sizeof(old_state_view) || control->struct_size < sizeof(old_control))
    return host->status_create(LOOM_STATUS_CODE_INTERNAL, "small_hook: host structs too small");
  if (event == LOOM_EVENT_STEP_END && hook->stop_after > 0 && state->step >= hook->stop_after)
    control->request_stop = 1;
  if (event == LOOM_EVENT_TRAIN_END) {
    fprintf(hook->file, "small_hook train_end step=%lld total_steps=%lld\n", (long long)state->step,
            (long long)state->total_steps);
    fflush(hook->file);
  }
  return NULL;
}

static const old_hook_vtable hook_vtable = {sizeof(old_hook_vtable), hook_create, hook_destroy,
                                            hook_on_event};

/* ---- Registration -------------------------------------------------------------------- */

static const loom_option_spec tracker_options[] = {
    {sizeof(loom_option_spec), "path", LOOM_OPTION_TYPE_STRING, "small_tracker.txt", 0,
     "File inside the run directory."},
};
static const loom_option_spec hook_options[] = {
    {sizeof(loom_option_spec), "path", LOOM_OPTION_TYPE_STRING, "small_hook.txt", 0,
     "File inside the run directory."},
    {sizeof(loom_option_spec), "stop_after", LOOM_OPTION_TYPE_INT, "0", 0,
     "Request a stop once this many steps are done; 0 never stops."},
};

static const loom_component tracker_component = {
    sizeof(loom_component), LOOM_KIND_TRACKER, "small_tracker",
    "Conformance: a tracker with an old, shorter vtable.", tracker_options,
    sizeof tracker_options / sizeof tracker_options[0], &tracker_table.vtable};
static const loom_component hook_component = {
    sizeof(loom_component), LOOM_KIND_HOOK, "small_hook",
    "Conformance: a hook reading old, shorter state and control structs.", hook_options,
    sizeof hook_options / sizeof hook_options[0], &hook_vtable};

static loom_status* register_components(loom_registry* registry) {
  loom_status* status = host->registry_add_component(registry, &tracker_component);
  if (status != NULL) return status;
  return host->registry_add_component(registry, &hook_component);
}

static const loom_plugin_info info = {sizeof(loom_plugin_info), LOOM_ABI_MAJOR, LOOM_ABI_MINOR,
                                      "small_struct", "0.1.0", NULL, register_components};

LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api* h);
LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api* h) {
  host = h;
  return &info;
}
