/* example_tracker: an experiment tracker in plain C99 (torch-free).
 *
 * Writes one line per log call, "step<TAB>loss", to a file in the run directory. It needs
 * nothing but <loom/abi.h>: no C++ and no LibTorch, so it keeps loading after the host
 * upgrades LibTorch. Only rank 0 writes; other ranks get an instance that does nothing.
 *
 * The shape of every C plugin: callbacks in a vtable, the vtable in a component, the
 * component registered from the plugin info, and the info returned by the one exported
 * function, loom_plugin_init. */
#include <loom/abi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const loom_host_api* host; /* static: set once by loom_plugin_init, valid until exit */

/* The plugin defines the opaque instance type; the host only holds the pointer. */
struct loom_tracker {
  FILE* file; /* owned; NULL on ranks other than 0 */
};

static void example_tracker_destroy(loom_tracker* tracker) {
  if (tracker == NULL) return; /* every destroy accepts NULL */
  if (tracker->file != NULL) fclose(tracker->file);
  free(tracker);
}

static loom_status* example_tracker_create(const loom_context* context, const loom_config* config,
                                           loom_tracker** out) {
  /* Fields past the host's struct_size are absent: check before reading. */
  int32_t rank = LOOM_STRUCT_HAS(context, loom_context, rank) ? context->rank : 0;
  const char* run_dir = LOOM_STRUCT_HAS(context, loom_context, run_dir) ? context->run_dir : ".";
  const char* name = NULL; /* owned by config, valid during this call only */
  char path[4096];
  loom_tracker* tracker;
  loom_status* status;

  *out = NULL;
  status = host->config_get_string(config, "path", &name);
  if (status != NULL) return status; /* hand the host's status back unchanged */
  tracker = (loom_tracker*)calloc(1, sizeof *tracker);
  if (tracker == NULL) return host->status_create(LOOM_STATUS_CODE_INTERNAL, "example_tracker: out of memory");
  if (rank == 0) {
    if (name[0] == '/') snprintf(path, sizeof path, "%s", name);
    else snprintf(path, sizeof path, "%s/%s", run_dir, name);
    tracker->file = fopen(path, "w");
    if (tracker->file == NULL) {
      char message[4200];
      snprintf(message, sizeof message, "example_tracker: cannot open '%s'; check the path option", path);
      example_tracker_destroy(tracker);
      /* INVALID_ARGUMENT: the user can fix it in the manifest (exit 2). */
      return host->status_create(LOOM_STATUS_CODE_INVALID_ARGUMENT, message);
    }
    fputs("step\tloss\n", tracker->file);
  }
  *out = tracker;
  return NULL; /* NULL means success */
}

static loom_status* example_tracker_log(loom_tracker* tracker, const loom_metrics* metrics) {
  size_t i;
  if (tracker->file == NULL) return NULL; /* not rank 0 */
  /* metrics and everything it points to are borrowed for this call: copy what you keep. */
  for (i = 0; i < metrics->count; ++i) {
    const loom_metric* m = metrics->items[i];
    if (strcmp(m->name, "loss") == 0) fprintf(tracker->file, "%lld\t%.6g\n", (long long)metrics->step, m->value);
  }
  fflush(tracker->file); /* a preempted run keeps what it logged */
  return NULL;
}

/* Options: name, type, default (as text), required, one-line doc. The host validates the
   manifest against them, fills in defaults and prints them in `host describe`. */
static const loom_option_spec example_tracker_options[] = {
    {.struct_size = sizeof(loom_option_spec),
     .name = "path",
     .type = LOOM_OPTION_TYPE_STRING,
     .default_value = "example_tracker.tsv",
     .required = 0,
     .doc = "File to write; a relative path is inside the run directory."},
};

/* The required callbacks. Optional ones left out (note, resume, state_save, state_load) are
   NULL, which tells the host this tracker does not have them. */
static const loom_tracker_vtable example_tracker_vtable = {
    .struct_size = sizeof(loom_tracker_vtable),
    .create = example_tracker_create,
    .destroy = example_tracker_destroy,
    .log = example_tracker_log,
};

static const loom_component example_tracker_component = {
    .struct_size = sizeof(loom_component),
    .kind = LOOM_KIND_TRACKER,
    .name = "example_tracker",
    .summary = "Writes step and loss to a tab-separated file.",
    .options = example_tracker_options,
    .option_count = sizeof example_tracker_options / sizeof example_tracker_options[0],
    .vtable = &example_tracker_vtable,
};

static loom_status* example_tracker_register(loom_registry* registry) {
  return host->registry_add_component(registry, &example_tracker_component);
}

static const loom_plugin_info example_tracker_info = {
    .struct_size = sizeof(loom_plugin_info),
    .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR,
    .name = "example_tracker",
    .version = "0.1.0",
    .torch_fingerprint = NULL, /* torch-free: no fingerprint */
    .register_components = example_tracker_register,
};

/* The one exported symbol. It must not call into the host: versions are not checked yet. */
LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api* h);
LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api* h) {
  host = h;
  return &example_tracker_info;
}
