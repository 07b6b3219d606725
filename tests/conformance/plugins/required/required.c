/* required.c: the tracker "needs_target", whose option "target" (string) is declared
 * required. The real plugins declare no required option, so bad_input uses this one to prove
 * rule 9's validation: a manifest that omits a required option fails with exit code 2 and one
 * line naming the file, the table, the component, the option and the fix. */
#include <loom/abi.h>

#include <stdlib.h>

static const loom_host_api* host;

struct loom_tracker {
  int unused;
};

static loom_status* needs_create(const loom_context* context, const loom_config* config,
                                 loom_tracker** out) {
  const char* target = NULL;
  loom_status* status;
  (void)context;
  *out = NULL;
  status = host->config_get_string(config, "target", &target);
  if (status != NULL) return status;
  *out = (loom_tracker*)calloc(1, sizeof **out);
  return *out ? NULL : host->status_create(LOOM_STATUS_CODE_INTERNAL, "needs_target: out of memory");
}
static void needs_destroy(loom_tracker* tracker) { free(tracker); }
static loom_status* needs_log(loom_tracker* tracker, const loom_metrics* metrics) {
  (void)tracker;
  (void)metrics;
  return NULL;
}

static const loom_option_spec options[] = {
    {sizeof(loom_option_spec), "target", LOOM_OPTION_TYPE_STRING, NULL, 1,
     "Where the metrics go; there is no sensible default."},
    {sizeof(loom_option_spec), "every", LOOM_OPTION_TYPE_INT, "1", 0, "Log every N calls."},
};

static const loom_tracker_vtable vtable = {sizeof(loom_tracker_vtable), needs_create,
                                           needs_destroy, needs_log, NULL};

static const loom_component component = {sizeof(loom_component), LOOM_KIND_TRACKER, "needs_target",
                                         "Conformance: a tracker with a required option.", options,
                                         sizeof options / sizeof options[0], &vtable};

static loom_status* register_components(loom_registry* registry) {
  return host->registry_add_component(registry, &component);
}

static const loom_plugin_info info = {sizeof(loom_plugin_info), LOOM_ABI_MAJOR, LOOM_ABI_MINOR,
                                      "required", "0.1.0", NULL, register_components};

LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api* h);
LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api* h) {
  host = h;
  return &info;
}
