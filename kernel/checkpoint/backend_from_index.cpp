#include "checkpoint/backend_from_index.hpp"

#include "base/failure.hpp"

namespace loom {

std::unique_ptr<CheckpointBackendInstance> open_backend(const CheckpointBackendRecord& record,
                                                        const Registry& registry,
                                                        const std::filesystem::path& checkpoint) {
  const Component* component = registry.lookup(LOOM_KIND_CHECKPOINT, record.use);
  if (!component)
    throw plugin_failure(checkpoint.string() + ": written by checkpoint backend \"" + record.use +
                         "\", which no plugin on the search path provides; add its plugin to the search path "
                         "(`host plugins` lists what is there)");
  SlotConfig slot{"checkpoint", component, {}};
  slot.config.values = record.options;
  for (const OptionSpec& spec : component->options)
    if (!slot.config.values.count(spec.name) && spec.default_text) slot.config.values[spec.name] = parse_default(spec);
  RunContext run;  // a reader needs no run: it sees the checkpoint's own folder, on the CPU
  run.run_dir = checkpoint.string();
  run.device = "cpu";
  return std::make_unique<CheckpointBackendInstance>(slot, run);
}

}  // namespace loom
