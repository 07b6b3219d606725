/* large_struct.c: a plugin compiled against a NEWER, larger version of the ABI structs: its
 * loom_plugin_info, loom_component, loom_tracker_vtable and loom_option_spec each carry extra
 * tail fields the host does not know, and every struct_size says so. It also claims the next
 * minor version (LOOM_ABI_MINOR + 1), which rule 2 says the host must accept.
 * Proves rule 3, larger side: the host ignores the unknown tails. In particular it walks the
 * option specs with the plugin's stride (options[0].struct_size), not its own sizeof, so all
 * five options arrive intact; a host using the wrong stride would read garbage names, types
 * and defaults. Effects the test checks: large_tracker writes `repeat` lines per logged step
 * with its `tag` and `scale`, and `host describe large_tracker` shows every option. */
#include <loom/abi.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- The "new" declarations: the current struct first, then fields a later minor adds -- */

typedef struct new_option_spec {
  loom_option_spec base;
  const char* future_unit; /* e.g. "steps" */
  double future_min;
  int64_t future_flags;
} new_option_spec;

typedef struct new_tracker_vtable {
  loom_tracker_vtable base;
  loom_status* (*future_flush)(loom_tracker* tracker);
  loom_status* (*future_close)(loom_tracker* tracker, int32_t reason);
  uint64_t future_capabilities;
} new_tracker_vtable;

typedef struct new_component {
  loom_component base;
  const char* future_homepage;
  uint32_t future_flags;
} new_component;

typedef struct new_plugin_info {
  loom_plugin_info base;
  const char* future_license;
  loom_status* (*future_shutdown)(void);
} new_plugin_info;

LOOM_ABI_ASSERT(sizeof(new_option_spec) > sizeof(loom_option_spec));
LOOM_ABI_ASSERT(sizeof(new_tracker_vtable) > sizeof(loom_tracker_vtable));
LOOM_ABI_ASSERT(sizeof(new_component) > sizeof(loom_component));
LOOM_ABI_ASSERT(sizeof(new_plugin_info) > sizeof(loom_plugin_info));

static const loom_host_api* host;

struct loom_tracker {
  FILE* file;
  char tag[64];
  int64_t repeat;
  double scale;
  int32_t verbose;
};

static loom_status* tracker_create(const loom_context* context, const loom_config* config,
                                   loom_tracker** out) {
  const char* name = NULL;
  const char* tag = NULL;
  int64_t repeat = 0;
  double scale = 0.0;
  int32_t verbose = 0;
  char path[4096];
  loom_status* status;
  *out = NULL;
  if ((status = host->config_get_string(config, "path", &name)) != NULL) return status;
  if ((status = host->config_get_string(config, "tag", &tag)) != NULL) return status;
  if ((status = host->config_get_int(config, "repeat", &repeat)) != NULL) return status;
  if ((status = host->config_get_float(config, "scale", &scale)) != NULL) return status;
  if ((status = host->config_get_bool(config, "verbose", &verbose)) != NULL) return status;
  *out = (loom_tracker*)calloc(1, sizeof **out);
  if (*out == NULL) return host->status_create(LOOM_STATUS_CODE_INTERNAL, "large_tracker: out of memory");
  snprintf(path, sizeof path, "%s/%s", context->run_dir, name);
  (*out)->file = fopen(path, "w");
  if ((*out)->file == NULL) {
    char message[4200];
    snprintf(message, sizeof message, "cannot open %s: %s", path, strerror(errno));
    free(*out);
    *out = NULL;
    return host->status_create(LOOM_STATUS_CODE_INVALID_ARGUMENT, message);
  }
  snprintf((*out)->tag, sizeof (*out)->tag, "%s", tag);
  (*out)->repeat = repeat;
  (*out)->scale = scale;
  (*out)->verbose = verbose;
  return NULL;
}

static void tracker_destroy(loom_tracker* tracker) {
  if (tracker == NULL) return;
  fclose(tracker->file);
  free(tracker);
}

static loom_status* tracker_log(loom_tracker* tracker, const loom_metrics* metrics) {
  int64_t i;
  for (i = 0; i < tracker->repeat; ++i)
    fprintf(tracker->file, "tag=%s step=%lld copy=%lld scale=%g verbose=%d\n", tracker->tag,
            (long long)metrics->step, (long long)i, tracker->scale, (int)tracker->verbose);
  fflush(tracker->file);
  return NULL;
}

static loom_status* tracker_note(loom_tracker* tracker, const char* text) {
  fprintf(tracker->file, "note %s\n", text);
  return NULL;
}

/* Tail callbacks this host does not know; calling them would be a bug, so they say so. */
static loom_status* future_flush(loom_tracker* tracker) {
  fprintf(tracker->file, "POISON: future_flush called\n");
  return host->status_create(LOOM_STATUS_CODE_INTERNAL, "large_tracker: unknown tail called");
}
static loom_status* future_close(loom_tracker* tracker, int32_t reason) {
  fprintf(tracker->file, "POISON: future_close(%d) called\n", (int)reason);
  return host->status_create(LOOM_STATUS_CODE_INTERNAL, "large_tracker: unknown tail called");
}

static const new_tracker_vtable tracker_vtable = {
    {sizeof(new_tracker_vtable), tracker_create, tracker_destroy, tracker_log, tracker_note},
    future_flush, future_close, 0xffffffffffffffffull};

#define NEW_OPTION(name, type, def, doc) \
  {{sizeof(new_option_spec), name, type, def, 0, doc}, "unit-" name, -1.0, 0x7f7f7f7f}

static const new_option_spec tracker_options[] = {
    NEW_OPTION("path", LOOM_OPTION_TYPE_STRING, "large_tracker.txt", "File inside the run directory."),
    NEW_OPTION("tag", LOOM_OPTION_TYPE_STRING, "untagged", "Text written on every line."),
    NEW_OPTION("repeat", LOOM_OPTION_TYPE_INT, "2", "Lines written per log call."),
    NEW_OPTION("scale", LOOM_OPTION_TYPE_FLOAT, "1.5", "A number echoed on every line."),
    NEW_OPTION("verbose", LOOM_OPTION_TYPE_BOOL, "false", "A flag echoed on every line."),
};

static const new_component tracker_component = {
    {sizeof(new_component), LOOM_KIND_TRACKER, "large_tracker",
     "Conformance: a tracker built with larger (newer) structs.",
     &tracker_options[0].base, sizeof tracker_options / sizeof tracker_options[0],
     &tracker_vtable},
    "https://example.invalid/large_tracker", 0xffffffffu};

static loom_status* register_components(loom_registry* registry) {
  return host->registry_add_component(registry, &tracker_component.base);
}

static const new_plugin_info info = {
    {sizeof(new_plugin_info), LOOM_ABI_MAJOR, LOOM_ABI_MINOR + 1, "large_struct", "0.1.0", NULL,
     register_components},
    "MIT", NULL};

LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api* h);
LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api* h) {
  host = h;
  return &info.base;
}
