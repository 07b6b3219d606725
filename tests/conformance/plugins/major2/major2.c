/* major2.c: a plugin that claims ABI major LOOM_ABI_MAJOR + 1 (minor 3).
 * Proves rule 2: the host refuses a plugin whose major version differs from its own, with
 * exit code 3 and a message naming both versions ("2.3" and "1.0") and the plugin file; and
 * `host plugins` lists it as FAILED while it keeps listing every other plugin.
 * If the host skipped the check, this plugin would load fine (it registers nothing) and the
 * run would succeed, so the refusal test would fail. */
#include <loom/abi.h>

#include <stddef.h>

#define MAJOR2_MINOR 3

static loom_status* register_components(loom_registry* registry) {
  (void)registry;
  return NULL;
}

static const loom_plugin_info info = {
    sizeof(loom_plugin_info), LOOM_ABI_MAJOR + 1, MAJOR2_MINOR, "major2", "0.1.0",
    NULL /* torch-free */, register_components};

LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api* host);
LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api* host) {
  (void)host; /* versions are not negotiated yet: do not call into the host */
  return &info;
}
