/* pure_c.c: the schedule "inverse_step", factor(step) = scale / step, in strict C99
 * (-std=c99 -pedantic-errors) against <loom/abi.h> alone: no C++ runtime, no LibTorch.
 * Proves rules 6 and 10: a plugin written in pure C loads, reads its declared option through
 * the host API, and drives a real run; the test sees its factors in the lr that the jsonl
 * tracker logs (lr = optimizer lr * scale / step). */
#include <loom/abi.h>

#include <stdlib.h>

static const loom_host_api* host; /* static; set by loom_plugin_init */

struct loom_schedule {
  double scale;
};

static loom_status* inverse_create(const loom_context* context, const loom_config* config,
                                   loom_schedule** out) {
  double scale = 0.0;
  loom_status* status;
  (void)context;
  *out = NULL;
  status = host->config_get_float(config, "scale", &scale);
  if (status != NULL) return status;
  if (!(scale > 0.0))
    return host->status_create(LOOM_STATUS_CODE_INVALID_ARGUMENT, "inverse_step: scale must be > 0");
  *out = (loom_schedule*)malloc(sizeof **out);
  if (*out == NULL) return host->status_create(LOOM_STATUS_CODE_INTERNAL, "inverse_step: out of memory");
  (*out)->scale = scale;
  return NULL;
}

static void inverse_destroy(loom_schedule* schedule) { free(schedule); }

static loom_status* inverse_factor(loom_schedule* schedule, int64_t step, double* out) {
  if (step < 1)
    return host->status_create(LOOM_STATUS_CODE_INVALID_ARGUMENT, "inverse_step: steps start at 1");
  *out = schedule->scale / (double)step;
  return NULL;
}

static const loom_option_spec inverse_options[] = {
    {sizeof(loom_option_spec), "scale", LOOM_OPTION_TYPE_FLOAT, "1.0", 0,
     "Factor at step 1; step N gets scale / N."},
};

static const loom_schedule_vtable inverse_vtable = {sizeof(loom_schedule_vtable), inverse_create,
                                                    inverse_destroy, inverse_factor};

static const loom_component inverse_component = {
    sizeof(loom_component), LOOM_KIND_SCHEDULE, "inverse_step",
    "Conformance: lr factor scale / step, written in C99.", inverse_options,
    sizeof inverse_options / sizeof inverse_options[0], &inverse_vtable};

static loom_status* register_components(loom_registry* registry) {
  return host->registry_add_component(registry, &inverse_component);
}

static const loom_plugin_info info = {sizeof(loom_plugin_info), LOOM_ABI_MAJOR, LOOM_ABI_MINOR,
                                      "pure_c", "0.1.0", NULL /* torch-free */, register_components};

LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api* h);
LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api* h) {
  host = h;
  return &info;
}
