/* dup.c: compiled twice, into duplicate/dup_a.so and duplicate/dup_b.so; both register a
 * tracker named "dup_tracker".
 * Proves rule 8: when two plugin files register the same component name, the host refuses
 * with exit code 3 and a message naming both files. */
#include <loom/abi.h>

#include <stddef.h>

static const loom_host_api* host;

static loom_status* dup_create(const loom_context* context, const loom_config* config,
                               loom_tracker** out) {
  (void)context;
  (void)config;
  *out = NULL;
  return host->status_create(LOOM_STATUS_CODE_INTERNAL, "dup_tracker must never be created");
}
static void dup_destroy(loom_tracker* tracker) { (void)tracker; }
static loom_status* dup_log(loom_tracker* tracker, const loom_metrics* metrics) {
  (void)tracker;
  (void)metrics;
  return NULL;
}

static const loom_tracker_vtable vtable = {sizeof(loom_tracker_vtable), dup_create, dup_destroy,
                                           dup_log, NULL};

static const loom_component component = {sizeof(loom_component), LOOM_KIND_TRACKER, "dup_tracker",
                                         "Conformance: registered by two files at once.", NULL, 0,
                                         &vtable};

static loom_status* register_components(loom_registry* registry) {
  return host->registry_add_component(registry, &component);
}

static const loom_plugin_info info = {sizeof(loom_plugin_info), LOOM_ABI_MAJOR, LOOM_ABI_MINOR,
                                      "dup_" DUP_WHICH, "0.1.0", NULL, register_components};

LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api* h);
LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api* h) {
  host = h;
  return &info;
}
