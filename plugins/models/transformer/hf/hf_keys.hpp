// hf_keys.hpp: typed, checked access to the keys of a Hugging Face config.json (untrusted);
// every failure is a loom::Error naming the file and the key.
#pragma once

#include <loom/plugin.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <string>

namespace loom_gpt {

class Keys {
 public:
  Keys(const nlohmann::json& j, std::string path) : j_(j), path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw loom::Error("hf_causal_lm: " + path_ + ": \"" + key + "\" " + what, LOOM_STATUS_CODE_INVALID_ARGUMENT);
  }
  bool has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  const nlohmann::json& j() const { return j_; }
  const nlohmann::json& at(const std::string& key) const { return j_.at(key); }

  int64_t positive(const std::string& key) const {
    if (!has(key)) fail(key, "is missing; config.json must give it");
    return positive_value(key);
  }
  int64_t positive(const std::string& key, int64_t otherwise) const { return has(key) ? positive_value(key) : otherwise; }
  int64_t count(const std::string& key, int64_t otherwise) const {  // 0 allowed
    if (!has(key)) return otherwise;
    const nlohmann::json& v = j_.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (int64_t(1) << 31))
      fail(key, "must be a whole number from 0 to 2^31, got " + v.dump());
    return v.get<int64_t>();
  }
  double number(const std::string& key, double otherwise) const {
    if (!has(key)) return otherwise;
    if (!j_.at(key).is_number()) fail(key, "must be a number");
    const double v = j_.at(key).get<double>();
    if (!std::isfinite(v)) fail(key, "must be finite");
    return v;
  }
  bool flag(const std::string& key, bool otherwise) const {
    if (!has(key)) return otherwise;
    if (!j_.at(key).is_boolean()) fail(key, "must be true or false");
    return j_.at(key).get<bool>();
  }
  std::string text(const std::string& key, const std::string& otherwise) const {
    if (!has(key)) return otherwise;
    if (!j_.at(key).is_string()) fail(key, "must be a string");
    return j_.at(key).get<std::string>();
  }

 private:
  int64_t positive_value(const std::string& key) const {
    const nlohmann::json& v = j_.at(key);
    // A limit well above any real model, so products of sizes cannot overflow.
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (int64_t(1) << 31))
      fail(key, "must be a positive integer (at most 2^31), got " + v.dump());
    return v.get<int64_t>();
  }
  const nlohmann::json& j_;
  std::string path_;
};

}  // namespace loom_gpt
