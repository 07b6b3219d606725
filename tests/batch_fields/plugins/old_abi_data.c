/* old_abi_data.c: a dataset in strict C99, built twice: against the frozen ABI 1.0 headers
 * (tests/batch_fields/abi_1_0, component "abi10_data") and the frozen 1.1 headers (abi_1_1,
 * "abi11_data"), whose loom_batch ends at targets. It proves that a host with ABI 1.2 batch
 * fields and epochs still loads and trains with datasets that know nothing of them.
 * Batches: 2 x 4 counting tokens modulo 64, targets the next token. */
#include <loom/abi.h>

#ifndef OLD_ABI_DATA_NAME
#error "build with -DOLD_ABI_DATA_NAME=\"abi1x_data\""
#endif

#include <stdlib.h>

static const loom_host_api* host; /* static; set by loom_plugin_init */

struct loom_dataset {
  int64_t next_token;
};

typedef struct owned_tensor {
  DLManagedTensor managed;
  int64_t data[8];
  int64_t shape[2];
} owned_tensor;

static void free_tensor(DLManagedTensor* self) { free(self->manager_ctx); }

static DLManagedTensor* counting_tensor(int64_t first) {
  owned_tensor* t = (owned_tensor*)calloc(1, sizeof *t);
  int i;
  if (t == NULL) return NULL;
  for (i = 0; i < 8; ++i) t->data[i] = (first + i) % 64;
  t->shape[0] = 2;
  t->shape[1] = 4;
  t->managed.dl_tensor.data = t->data;
  t->managed.dl_tensor.device.device_type = kDLCPU;
  t->managed.dl_tensor.ndim = 2;
  t->managed.dl_tensor.dtype.code = kDLInt;
  t->managed.dl_tensor.dtype.bits = 64;
  t->managed.dl_tensor.dtype.lanes = 1;
  t->managed.dl_tensor.shape = t->shape;
  t->managed.manager_ctx = t;
  t->managed.deleter = free_tensor;
  return &t->managed;
}

static loom_status* data_create(const loom_context* context, const loom_config* config, loom_dataset** out) {
  (void)context;
  (void)config;
  *out = (loom_dataset*)calloc(1, sizeof **out);
  return *out ? NULL : host->status_create(LOOM_STATUS_CODE_INTERNAL, OLD_ABI_DATA_NAME ": out of memory");
}

static void data_destroy(loom_dataset* dataset) { free(dataset); }

static loom_status* data_next(loom_dataset* dataset, loom_batch* out) {
  out->inputs = counting_tensor(dataset->next_token);
  out->targets = counting_tensor(dataset->next_token + 1);
  dataset->next_token += 8;
  if (out->inputs == NULL || out->targets == NULL)
    return host->status_create(LOOM_STATUS_CODE_INTERNAL, OLD_ABI_DATA_NAME ": out of memory");
  return NULL;
}

static const loom_dataset_vtable data_vtable = {
    .struct_size = sizeof(loom_dataset_vtable), .create = data_create, .destroy = data_destroy,
    .next = data_next};

static const loom_component data_component = {
    .struct_size = sizeof(loom_component), .kind = LOOM_KIND_DATASET, .name = OLD_ABI_DATA_NAME,
    .summary = "Counting batches from a dataset built against frozen old ABI headers.", .options = NULL,
    .option_count = 0, .vtable = &data_vtable};

static loom_status* register_components(loom_registry* registry) {
  return host->registry_add_component(registry, &data_component);
}

static const loom_plugin_info info = {
    .struct_size = sizeof(loom_plugin_info), .abi_major = LOOM_ABI_MAJOR, .abi_minor = LOOM_ABI_MINOR,
    .name = OLD_ABI_DATA_NAME, .version = "0.1.0", .torch_fingerprint = NULL,
    .register_components = register_components};

LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api* h);
LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api* h) {
  host = h;
  return &info;
}
