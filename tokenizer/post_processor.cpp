// post_processor.cpp: see post_processor.hpp. Only single texts are encoded (no pairs), so a
// template's "single" list is the one that matters.
#include "post_processor.hpp"

namespace loom::tok {

namespace {

int32_t special_id(const Json& name, const std::string& where, const Vocabulary& vocab) {
  if (!name.is_string()) throw TokenizerError(where + " must be a token string");
  const auto id = vocab.find(name.get<std::string>());
  if (!id) throw TokenizerError(where + " names \"" + name.get<std::string>() + "\", which is not in the vocabulary");
  return *id;
}

// A list of items: a special token's id, or -1 for the encoded text.
class Template : public PostProcessor {
 public:
  explicit Template(std::vector<int32_t> items) : items_(std::move(items)) {}
  std::vector<int32_t> process(std::vector<int32_t> ids, bool add_special_tokens) const override {
    if (!add_special_tokens) return ids;
    std::vector<int32_t> out;
    out.reserve(ids.size() + items_.size());
    for (const int32_t item : items_) {
      if (item >= 0) out.push_back(item);
      else out.insert(out.end(), ids.begin(), ids.end());
    }
    return out;
  }

 private:
  std::vector<int32_t> items_;
};

class Sequence : public PostProcessor {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PostProcessor>> steps) : steps_(std::move(steps)) {}
  std::vector<int32_t> process(std::vector<int32_t> ids, bool add_special_tokens) const override {
    for (const auto& step : steps_) ids = step->process(std::move(ids), add_special_tokens);
    return ids;
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

std::vector<int32_t> template_items(const Json& config, const std::string& where, const Vocabulary& vocab) {
  const Json& single = required_array(config, "single", where);
  std::vector<int32_t> items;
  for (size_t i = 0; i < single.size(); ++i) {
    const std::string at = where + ".single[" + std::to_string(i) + "]";
    if (single[i].contains("SpecialToken")) items.push_back(special_id(single[i]["SpecialToken"].value("id", Json()), at + ".SpecialToken.id", vocab));
    else if (single[i].contains("Sequence")) items.push_back(-1);
    else throw TokenizerError(at + " must be a SpecialToken or a Sequence");
  }
  return items;
}

// BertProcessing's cls and sep are [token, id] pairs.
int32_t pair_token(const Json& config, const char* key, const std::string& where, const Vocabulary& vocab) {
  const auto it = config.find(key);
  if (it == config.end() || !it->is_array() || it->empty()) throw TokenizerError(where + "." + key + " must be [token, id]");
  return special_id((*it)[0], where + "." + key + "[0]", vocab);
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const Json& config, const std::string& where, const Vocabulary& vocab) {
  if (config.is_null()) return nullptr;
  const std::string type = component_type(config, where);
  if (type == "TemplateProcessing") return std::make_unique<Template>(template_items(config, where, vocab));
  if (type == "ByteLevel") return nullptr;
  if (type == "BertProcessing" || type == "RobertaProcessing")
    return std::make_unique<Template>(std::vector<int32_t>{pair_token(config, "cls", where, vocab), -1,
                                                           pair_token(config, "sep", where, vocab)});
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PostProcessor>> steps;
    const Json& list = required_array(config, "processors", where);
    for (size_t i = 0; i < list.size(); ++i) {
      auto step = make_post_processor(list[i], where + ".processors[" + std::to_string(i) + "]", vocab);
      if (step) steps.push_back(std::move(step));
    }
    return std::make_unique<Sequence>(std::move(steps));
  }
  unsupported(where, type);
}

}  // namespace loom::tok
