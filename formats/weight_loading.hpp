// weight_loading.hpp: copies named tensors from a source (a Hugging Face folder, a Loom
// checkpoint) into a model's named parameters, the one way both `hf_causal_lm`'s `from` and
// the host's `[model] init_from` load weights. Strict loading refuses any mismatch; either way
// the report lists what was missing, unexpected or of the wrong shape or dtype.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hf_folder.hpp"
#include "peft_adapter.hpp"
#include "tensor_split.hpp"

namespace loom::formats {

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual std::string where() const = 0;                // for messages: the folder or checkpoint
  virtual std::vector<std::string> names() const = 0;   // every tensor the source holds
  virtual bool has(const std::string& name) const = 0;
  // The tensor as stored (any dtype, on the CPU); may borrow the source's memory, so it is
  // copied before done(name) is called.
  virtual at::Tensor view(const std::string& name) const = 0;
  virtual void done(const std::string&) const {}        // its bytes are no longer needed
};

// A Hugging Face folder's safetensors weights, read through the memory map: a tensor's pages
// leave the resident set once it is copied (peak memory stays near the model's own size).
class HfWeightSource final : public WeightSource {
 public:
  explicit HfWeightSource(const std::string& dir) : weights_(dir) {}
  std::string where() const override { return weights_.dir(); }
  std::vector<std::string> names() const override { return weights_.names(); }
  bool has(const std::string& name) const override { return weights_.find(name) != nullptr; }
  at::Tensor view(const std::string& name) const override;
  void done(const std::string& name) const override;
  const HfWeights& weights() const { return weights_; }

 private:
  HfWeights weights_;
};

// A PEFT adapter folder's adapter_model.safetensors (peft_adapter.hpp) under the model's own
// parameter names: "base_model.model." removed. A key without that prefix is refused.
class PeftWeightSource final : public WeightSource {
 public:
  explicit PeftWeightSource(const std::string& dir);
  std::string where() const override { return file_.path(); }
  std::vector<std::string> names() const override;
  bool has(const std::string& name) const override { return by_name_.count(name) > 0; }
  at::Tensor view(const std::string& name) const override;
  void done(const std::string& name) const override;

 private:
  SafetensorsFile file_;
  std::map<std::string, const TensorEntry*> by_name_;
};

// Tensor parallelism ([distributed] tensor_parallel = size): a rank holds piece `rank` of
// `size` equal pieces of each split parameter, so what it loads of such a name is that piece of
// the stored tensor (tensor_split.hpp). Other names pass through whole; a stored tensor that
// does not divide goes through whole too, and loading then reports its shape as mismatched.
class TensorPieceSource final : public WeightSource {
 public:
  TensorPieceSource(const WeightSource& whole, TensorSplits splits, int64_t rank, int64_t size)
      : whole_(whole), splits_(std::move(splits)), rank_(rank), size_(size) {}
  std::string where() const override { return whole_.where(); }
  std::vector<std::string> names() const override { return whole_.names(); }
  bool has(const std::string& name) const override { return whole_.has(name); }
  at::Tensor view(const std::string& name) const override {
    const at::Tensor t = whole_.view(name);
    const auto it = splits_.find(name);
    if (it == splits_.end() || !splits_evenly(t, it->second, size_)) return t;
    return piece_of(t, it->second, rank_, size_, name);
  }
  void done(const std::string& name) const override { whole_.done(name); }

 private:
  const WeightSource& whole_;
  TensorSplits splits_;
  int64_t rank_, size_;
};

using WriteValue = std::function<void(const std::string& name, const at::Tensor& param, const at::Tensor& value)>;

struct LoadRules {
  bool strict = true;
  std::string strict_key = "strict";  // the option that turns strictness off, for the message
  // Tried in order when a parameter's own name is absent: the name with this prefix removed
  // (GPT-2 checkpoints on the Hub store "h.0..." for the model's "transformer.h.0...").
  std::vector<std::string> optional_prefixes;
  // Source tensors that are not parameters and never count as unexpected (name suffixes):
  // GPT-2's attention mask buffers, an output layer stored beside tied embeddings.
  std::vector<std::string> ignored_suffixes;
  // Source tensors that other ranks load (experts placed on other ranks): never unexpected.
  std::set<std::string> held_elsewhere;
  // How a matched value goes into the named parameter (same shape; dtype and device converted).
  // Empty: param.copy_(value). A rank that keeps only a slice of each parameter writes that.
  WriteValue write;
};

struct LoadReport {
  size_t loaded = 0;
  std::vector<std::string> missing;     // parameters the source lacks
  std::vector<std::string> unexpected;  // source tensors no parameter takes
  std::vector<std::string> mismatched;  // "name: file (2, 3) F16, model (3, 2) float"
  bool clean() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
  // One line: "2 missing (a, b), 1 unexpected (c)", at most `show` names per list.
  std::string summary(size_t show = 4) const;
};

// Copies every parameter it can (values converted to the parameter's dtype and device).
// Strict: throws a FormatError (Kind::invalid) with the report's summary when anything
// mismatches, before any parameter is changed. Not strict: loads what matches and returns the
// report, which the caller logs.
LoadReport load_weights(const WeightSource& source, const std::vector<std::pair<std::string, at::Tensor>>& params,
                        const LoadRules& rules);

}  // namespace loom::formats
