// reference_io.hpp: talking to the independent Python references (hf_reference.py,
// tests/finetune/lora_reference.py): token ids as their --ids text, their JSON arrays as
// tensors, and the relative error the tests bound.
#pragma once

#include "torch_doctest.hpp"  // before any torch or doctest header

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "run_host.hpp"

namespace loom_test {

// Runs `python3 script args` and requires it to succeed.
inline void run_reference(const std::string& script, const std::string& args) {
  const Result r = run_shell(std::string(LOOM_PYTHON) + " " + LOOM_SOURCE_DIR + "/" + script + " " + args);
  INFO(r.err);
  INFO(r.out);
  REQUIRE(r.code == 0);
}

// Runs `python3 script LINE` for each of lines, in one Python process
// (tests/support/python_batch.py: the imports of torch and transformers once, not once a line),
// the lines listed in `listing`; requires every line to succeed.
inline void run_reference_batch(const std::string& script, const std::vector<std::string>& lines,
                                const std::filesystem::path& listing) {
  {
    std::ofstream out(listing);
    for (const std::string& line : lines) out << line << "\n";
  }
  const Result r = run_shell(std::string(LOOM_PYTHON) + " " + LOOM_SOURCE_DIR + "/tests/support/python_batch.py " +
                             LOOM_SOURCE_DIR + "/" + script + " " + listing.string());
  INFO(r.err);
  INFO(r.out);
  REQUIRE(r.code == 0);
}

// The same with --out FILE, parsed.
inline nlohmann::json reference_json(const std::string& script, const std::string& args,
                                     const std::filesystem::path& out) {
  run_reference(script, args + " --out " + out.string());
  return nlohmann::json::parse(read_file(out));
}

// "1,2,3;4,5,6" (quoted) for a reference's --ids.
inline std::string ids_text(const at::Tensor& ids) {
  std::string out;
  for (int64_t b = 0; b < ids.size(0); ++b) {
    if (b) out += ";";
    for (int64_t t = 0; t < ids.size(1); ++t) out += (t ? "," : "") + std::to_string(ids[b][t].item<int64_t>());
  }
  return "\"" + out + "\"";
}

// A nested JSON array of numbers (any depth) as a double tensor of its shape.
inline at::Tensor as_tensor(const nlohmann::json& nested) {
  std::vector<int64_t> shape;
  for (const nlohmann::json* level = &nested; level->is_array(); level = &(*level)[0]) shape.push_back(level->size());
  std::vector<double> flat;
  const auto collect = [&flat](const nlohmann::json& node, const auto& self) -> void {
    if (!node.is_array()) return flat.push_back(node.get<double>());
    for (const auto& item : node) self(item, self);
  };
  collect(nested, collect);
  return at::tensor(flat, at::kDouble).view(shape);
}

// message with every occurrence of path replaced by `by`: a sweep's folders are named after the
// field they vary, so a refusal must be checked for the field's name without its path.
inline std::string without_path(std::string message, const std::string& path, const std::string& by) {
  for (size_t at = message.find(path); at != std::string::npos; at = message.find(path, at + by.size()))
    message.replace(at, path.size(), by);
  return message;
}

// max |loom - ref| / max |ref|
inline double relative_error(const at::Tensor& loom, const at::Tensor& ref) {
  return (loom.to(at::kDouble) - ref).abs().max().item<double>() / ref.abs().max().item<double>();
}

// The largest relative error of the parameters' gradients (each with .name and a .tensor
// pointer) against ref_grads (name -> nested array); a parameter the reference does not list
// is skipped (a tied output layer is listed once). compared: how many were compared.
template <class Params>
double worst_gradient_error(const Params& params, const nlohmann::json& ref_grads, size_t& compared) {
  double worst = 0;
  compared = 0;
  for (const auto& p : params) {
    if (!ref_grads.contains(p.name)) continue;
    CAPTURE(p.name);
    REQUIRE(p.tensor->grad().defined());
    worst = std::max(worst, relative_error(p.tensor->grad(), as_tensor(ref_grads[p.name])));
    ++compared;
  }
  return worst;
}

}  // namespace loom_test
