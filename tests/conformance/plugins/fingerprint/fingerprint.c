/* fingerprint.c: a torch-linked-kind plugin (it offers an optimizer) that declares a torch
 * fingerprint no host has: "libtorch 0.0.0-conformance; cxx11abi 0; cuda none".
 * Proves rule 7: the host refuses a plugin whose fingerprint differs from its own, with exit
 * code 3 and a message naming both fingerprints. No LibTorch is needed to build it: the
 * fingerprint is only a string in loom_plugin_info. The optimizer's callbacks are stubs that
 * fail; the refusal must happen before registration, so they are never reached. */
#include <loom/abi.h>

#include <stddef.h>

#define WRONG_FINGERPRINT "libtorch 0.0.0-conformance; cxx11abi 0; cuda none"

static const loom_host_api* host;

static loom_status* stub_create(const loom_context* context, const loom_config* config,
                                const loom_param_groups* groups, loom_optimizer** out) {
  (void)context;
  (void)config;
  (void)groups;
  *out = NULL;
  return host->status_create(LOOM_STATUS_CODE_INTERNAL, "wrong_torch_sgd must never be created");
}

static void stub_destroy(loom_optimizer* optimizer) { (void)optimizer; }

static loom_status* stub_step(loom_optimizer* optimizer, const loom_optimizer_step_args* args) {
  (void)optimizer;
  (void)args;
  return host->status_create(LOOM_STATUS_CODE_INTERNAL, "wrong_torch_sgd must never step");
}

static const loom_optimizer_vtable vtable = {sizeof(loom_optimizer_vtable), stub_create,
                                             stub_destroy, stub_step, NULL, NULL};

static const loom_component component = {
    sizeof(loom_component), LOOM_KIND_OPTIMIZER, "wrong_torch_sgd",
    "Conformance: an optimizer built against a LibTorch the host does not run.", NULL, 0, &vtable};

static loom_status* register_components(loom_registry* registry) {
  return host->registry_add_component(registry, &component);
}

static const loom_plugin_info info = {sizeof(loom_plugin_info), LOOM_ABI_MAJOR, LOOM_ABI_MINOR,
                                      "wrong_fingerprint", "0.1.0", WRONG_FINGERPRINT,
                                      register_components};

LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api* h);
LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api* h) {
  host = h;
  return &info;
}
