#include "weight_loading.hpp"

#include <ATen/core/grad_mode.h>

#include <optional>
#include <set>
#include <sstream>

#include "format_error.hpp"

namespace loom::formats {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::optional<at::ScalarType> scalar_type_of(const DType& d) {
  const std::string n = d.name;
  if (n == "F64") return at::kDouble;
  if (n == "F32") return at::kFloat;
  if (n == "F16") return at::kHalf;
  if (n == "BF16") return at::kBFloat16;
  if (n == "I64") return at::kLong;
  if (n == "I32") return at::kInt;
  if (n == "I16") return at::kShort;
  if (n == "I8") return at::kChar;
  if (n == "U8") return at::kByte;
  return std::nullopt;  // U16, U32, U64: no LibTorch 1.13 dtype
}

std::string shape_text(at::IntArrayRef shape) {
  std::ostringstream out;
  out << "(";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << (shape.size() == 1 ? ",)" : ")");
  return out.str();
}

std::string list(const std::vector<std::string>& names, size_t show) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < show; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > show) out += ", and " + std::to_string(names.size() - show) + " more";
  return out;
}

}  // namespace

namespace {

// The entry's bytes as a tensor borrowing the file's memory map.
at::Tensor entry_view(const SafetensorsFile& file, const TensorEntry& entry, const std::string& name) {
  const auto type = scalar_type_of(*entry.dtype);
  if (!type)
    invalid("tensor '" + name + "' in '" + file.path() + "' has dtype " + entry.dtype->name +
            ", which LibTorch cannot hold; store the model in F32, F16 or BF16");
  // from_blob never writes: the tensor is only read (copied) before done().
  void* data = const_cast<unsigned char*>(file.data(entry));
  return at::from_blob(data, entry.shape, at::TensorOptions().dtype(*type));
}

}  // namespace

at::Tensor HfWeightSource::view(const std::string& name) const {
  const HfWeights::Tensor* t = weights_.find(name);
  if (t == nullptr) invalid("'" + weights_.dir() + "' holds no tensor '" + name + "'");
  return entry_view(*t->file, *t->entry, name);
}

PeftWeightSource::PeftWeightSource(const std::string& dir)
    : file_(join(dir, kPeftWeights)), by_name_(peft_tensors(file_)) {}

std::vector<std::string> PeftWeightSource::names() const {
  std::vector<std::string> out;
  for (const auto& [name, entry] : by_name_) out.push_back(name);
  return out;
}

at::Tensor PeftWeightSource::view(const std::string& name) const {
  const auto it = by_name_.find(name);
  if (it == by_name_.end()) invalid("'" + file_.path() + "' holds no tensor '" + kPeftKeyPrefix + name + "'");
  return entry_view(file_, *it->second, name);
}

void PeftWeightSource::done(const std::string& name) const {
  if (const auto it = by_name_.find(name); it != by_name_.end()) file_.release(*it->second);
}

void HfWeightSource::done(const std::string& name) const {
  if (const HfWeights::Tensor* t = weights_.find(name)) t->file->release(*t->entry);
}

std::string LoadReport::summary(size_t show) const {
  std::vector<std::string> parts;
  if (!missing.empty()) parts.push_back(std::to_string(missing.size()) + " missing (" + list(missing, show) + ")");
  if (!unexpected.empty())
    parts.push_back(std::to_string(unexpected.size()) + " unexpected (" + list(unexpected, show) + ")");
  if (!mismatched.empty())
    parts.push_back(std::to_string(mismatched.size()) + " mismatched (" + list(mismatched, show) + ")");
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  return out.empty() ? "every tensor matched" : out;
}

LoadReport load_weights(const WeightSource& source, const std::vector<std::pair<std::string, at::Tensor>>& params,
                        const LoadRules& rules) {
  LoadReport report;
  std::set<std::string> taken;
  struct Load {
    const std::string* name;  // the parameter's
    const at::Tensor* param;
    std::string found;        // the source's name for it
  };
  std::vector<Load> plan;
  for (const auto& [name, param] : params) {
    std::string found = source.has(name) ? name : "";
    for (const std::string& prefix : rules.optional_prefixes)
      if (found.empty() && name.rfind(prefix, 0) == 0 && source.has(name.substr(prefix.size())))
        found = name.substr(prefix.size());
    if (found.empty()) {
      report.missing.push_back(name);
      continue;
    }
    taken.insert(found);
    const at::Tensor stored = source.view(found);
    const bool float_source = at::isFloatingType(stored.scalar_type());
    if (stored.sizes() != param.sizes() || (at::isFloatingType(param.scalar_type()) && !float_source)) {
      report.mismatched.push_back(name + ": source " + shape_text(stored.sizes()) + " " +
                                  c10::toString(stored.scalar_type()) + ", model " + shape_text(param.sizes()) + " " +
                                  c10::toString(param.scalar_type()));
      continue;
    }
    plan.push_back({&name, &param, found});
  }
  for (const std::string& name : source.names()) {
    if (taken.count(name)) continue;
    bool ignored = rules.held_elsewhere.count(name) > 0;
    for (const std::string& suffix : rules.ignored_suffixes) ignored = ignored || ends_with(name, suffix);
    if (!ignored) report.unexpected.push_back(name);
  }
  if (rules.strict && !report.clean())
    invalid("the weights in '" + source.where() + "' do not fit the model: " + report.summary() +
            "; fix the folder, or set " + rules.strict_key + " = false to load what matches");
  at::NoGradGuard no_grad;
  for (const Load& load : plan) {
    if (rules.write) rules.write(*load.name, *load.param, source.view(load.found));
    else load.param->copy_(source.view(load.found));  // converts dtype and device
    source.done(load.found);
    ++report.loaded;
  }
  return report;
}

}  // namespace loom::formats
