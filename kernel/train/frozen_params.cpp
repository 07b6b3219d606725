#include "train/frozen_params.hpp"

#include <loom/model.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>

#include "base/failure.hpp"
#include "train/cpu_memory.hpp"
#include "train/init_weights.hpp"

namespace loom {

bool freeze_pattern_matches(const std::string& pattern, const std::string& name) {
  if (pattern.find('*') == std::string::npos) return name.find(pattern) != std::string::npos;
  // Glob over the whole name: backtrack to the last '*' on a mismatch.
  size_t p = 0, n = 0, star = std::string::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (p < pattern.size() && pattern[p] == name[n]) {
      ++p, ++n;
    } else if (star != std::string::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

namespace {

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string first_names(const std::vector<ModelParam>& params, size_t show) {
  std::string out;
  for (size_t i = 0; i < params.size() && i < show; ++i) out += (i ? ", " : "") + params[i].name;
  if (params.size() > show) out += ", ...";
  return out;
}

constexpr const char* kLoraA = ".lora_A.weight";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Every [lora] target must have adapted at least one layer: a typo would otherwise train nothing.
void check_lora_targets(const std::vector<ModelParam>& params, const RunPlan& plan, const std::string& model) {
  std::vector<std::string> adapted;  // module names
  for (const ModelParam& p : params)
    if ((p.flags & LOOM_PARAM_FLAG_ADAPTER) && ends_with(p.name, kLoraA))
      adapted.push_back(p.name.substr(0, p.name.size() - std::strlen(kLoraA)));
  for (const std::string& target : plan.lora.targets) {
    bool found = false;
    // loom::AdapterSpec::targets_module's rule (PEFT's), seen from the adapters the model added
    for (const std::string& module : adapted) found |= module == target || ends_with(module, "." + target);
    if (found) continue;
    std::set<std::string> last;  // what the model's matrices' modules are called, as a hint
    for (const ModelParam& p : params)
      if (p.tensor->dim() == 2 && ends_with(p.name, ".weight") && !(p.flags & LOOM_PARAM_FLAG_ADAPTER)) {
        const std::string module = p.name.substr(0, p.name.size() - 7);
        last.insert(module.substr(module.find_last_of('.') + 1));
      }
    std::string hint;
    for (const std::string& n : last) hint += (hint.empty() ? "" : ", ") + n;
    throw usage_failure("[lora] targets: \"" + target + "\" matches no linear layer of model " + model +
                        " (its matrices' modules are called: " + hint + "); fix or remove it" +
                        (adapted.empty() ? ". A model plugin that registers its linear layers without add_linear "
                                           "(ABI 1.8, sdk/README.md \"LoRA adapters\") gets no adapters at all"
                                         : ""));
  }
}

}  // namespace

std::string FrozenSummary::describe() const {
  std::string out = with_commas(trained) + " parameters train, " + with_commas(frozen) + " frozen";
  std::string detail;
  for (const Match& m : matches)
    detail += (detail.empty() ? "" : "; ") + ("freeze \"" + m.pattern + "\": " + std::to_string(m.tensors) +
                                               (m.tensors == 1 ? " tensor" : " tensors"));
  if (adapter_tensors > 0)
    detail += (detail.empty() ? "" : "; ") + ("LoRA: " + std::to_string(adapter_tensors) + " adapter tensors");
  return detail.empty() ? out : out + " (" + detail + ")";
}

bool frozen_by_plan(const RunPlan& plan, const ModelParam& param) {
  if (plan.lora.enabled && !(param.flags & LOOM_PARAM_FLAG_ADAPTER)) return true;
  return std::any_of(plan.model_init.freeze.begin(), plan.model_init.freeze.end(),
                     [&](const std::string& pattern) { return freeze_pattern_matches(pattern, param.name); });
}

FrozenSummary freeze_parameters(ModelInstance& model, const RunPlan& plan, const std::set<std::string>* dropped) {
  const std::vector<ModelParam> params = model.params();
  const std::string name = model.component().name;
  FrozenSummary out;
  std::set<std::string> frozen;
  for (const std::string& pattern : plan.model_init.freeze) {
    std::vector<ModelParam> matched;
    for (const ModelParam& p : params)
      if (freeze_pattern_matches(pattern, p.name)) frozen.insert(p.name), matched.push_back(p);
    if (matched.empty())
      throw usage_failure("[model] freeze: \"" + pattern + "\" matches no parameter of model " + name + " (they are " +
                          first_names(params, 6) + "); fix or remove the pattern");
    out.matches.push_back({pattern, matched.size(), first_names(matched, 4)});
  }
  if (plan.lora.enabled) {
    check_lora_targets(params, plan, name);
    for (const ModelParam& p : params) {
      if (!(p.flags & LOOM_PARAM_FLAG_ADAPTER)) frozen.insert(p.name);
      else out.adapter_tensors += !frozen.count(p.name);
    }
  }
  if (frozen.empty()) {
    for (const ModelParam& p : params) out.trained += p.tensor->numel();
    return out;
  }
  const bool bf16 = plan.model_init.frozen_dtype == "bf16";
  if (bf16 && plan.run.precision != Precision::bf16)
    throw usage_failure("[model] frozen_dtype = \"bf16\" needs [run] precision = \"bf16\" (autocast), which computes "
                        "with the bf16 weights; set it, or keep frozen_dtype = \"fp32\"");
  for (const ModelParam& p : params) {
    if (!frozen.count(p.name)) {
      out.trained += p.tensor->numel();
      continue;
    }
    out.frozen += p.tensor->numel();
    p.tensor->requires_grad_(false);
    if (!bf16 || !at::isFloatingType(p.tensor->scalar_type())) continue;
    if (dropped && dropped->count(p.name)) p.tensor->set_data(untouched_cpu_tensor(p.tensor->sizes(), at::kBFloat16));
    else p.tensor->set_data(p.tensor->detach().to(at::kBFloat16));
  }
  if (out.trained == 0)
    throw usage_failure("[model] freeze: every parameter of model " + name + " is frozen, so nothing would train; "
                        "remove a pattern");
  std::string checksum = dropped ? "" : frozen_checksum(params, frozen);
  model.set_frozen(std::move(frozen), std::move(checksum));
  return out;
}

void FrozenHasher::mix_bytes(const unsigned char* data, size_t size) {
  const auto mix = [this](uint64_t word) { state_ = (state_ ^ word) * 0x100000001b3ull; };  // FNV-1a's prime
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, data + i, 8);
    mix(word);
  }
  uint64_t tail = 0;
  std::memcpy(&tail, data + i, size - i);
  mix(tail ^ (uint64_t(size) << 56));
}

void FrozenHasher::add(const std::string& name, const at::Tensor& value) {
  const std::string header = name + "|" + c10::toString(value.scalar_type()) + "|" + c10::str(value.sizes());
  mix_bytes(reinterpret_cast<const unsigned char*>(header.data()), header.size());
  const at::Tensor values = value.detach().to(at::kCPU).contiguous();
  mix_bytes(static_cast<const unsigned char*>(values.data_ptr()), values.nbytes());
}

std::string FrozenHasher::text() const {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(state_));
  return text;
}

std::string frozen_checksum(const std::vector<ModelParam>& params, const std::set<std::string>& frozen) {
  FrozenHasher hash;
  bool any = false;
  for (const ModelParam& p : params) {
    if (!frozen.count(p.name)) continue;
    any = true;
    hash.add(p.name, *p.tensor);
  }
  return any ? hash.text() : "";
}

FrozenSummary prepare_model(ModelInstance& model, const RunPlan& plan, const std::set<std::string>* held_elsewhere,
                            const formats::WriteValue& write, const std::set<std::string>* dropped) {
  init_model_weights(model, plan.model_init, plan.lora, plan.registry, held_elsewhere, write);
  return freeze_parameters(model, plan, dropped);
}

}  // namespace loom
