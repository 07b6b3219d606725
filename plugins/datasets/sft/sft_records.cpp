// sft_records.cpp: see sft_records.hpp.
#include "sft_records.hpp"

#include <stdexcept>

namespace loom::sft {

namespace {

std::string string_field(const nlohmann::json& object, const std::string& key, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_string())
    throw BadLine(where + ": \"" + key + "\" must be a string");
  return it->get<std::string>();
}

std::vector<Message> parse_messages(const nlohmann::json& list, const std::string& key, const std::string& where) {
  if (!list.is_array() || list.empty()) throw BadLine(where + ": \"" + key + "\" must be a non-empty list of messages");
  std::vector<Message> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = where + ": " + key + "[" + std::to_string(i) + "]";
    if (!list[i].is_object()) throw BadLine(at + " must be an object with \"role\" and \"content\"");
    Message m;
    m.role = string_field(list[i], "role", at);
    const auto content = list[i].find("content");
    if (content != list[i].end() && content->is_string()) m.content = content->get<std::string>();
    else if (content != list[i].end() && !content->is_null())
      throw BadLine(at + ": \"content\" must be a string (parts lists are not supported)");
    m.extra = list[i];
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

void check_format(const RecordFormat& format) {
  if (format.format != "auto" && format.format != "messages" && format.format != "prompt_completion" &&
      format.format != "text")
    throw std::invalid_argument("format must be one of auto, messages, prompt_completion, text; got \"" +
                                format.format + "\"");
}

Record parse_record(const std::string& line, const RecordFormat& format, const std::string& where) {
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error&) {
    throw BadLine(where + ": not valid JSON (each line must be one JSON object)");
  } catch (const nlohmann::json::exception& e) {  // a number too large for a double (out_of_range 406)
    throw BadLine(where + ": not JSON Loom can read (" + e.what() + ")");
  }
  if (!value.is_object()) throw BadLine(where + ": not a JSON object");
  Record r;
  r.where = where;
  std::string shape = format.format;
  if (shape == "auto") {
    if (value.contains(format.messages_field)) shape = "messages";
    else if (value.contains(format.prompt_field) && value.contains(format.completion_field)) shape = "prompt_completion";
    else if (value.contains(format.text_field)) shape = "text";
    else
      throw BadLine(where + ": has none of \"" + format.messages_field + "\", \"" + format.prompt_field + "\"+\"" +
                    format.completion_field + "\", \"" + format.text_field + "\" (set the *_field options)");
  }
  if (shape == "messages") {
    r.kind = Record::Kind::messages;
    const auto it = value.find(format.messages_field);
    r.messages = parse_messages(it == value.end() ? nlohmann::json() : *it, format.messages_field, where);
  } else if (shape == "prompt_completion") {
    r.kind = Record::Kind::prompt_completion;
    r.prompt = string_field(value, format.prompt_field, where);
    r.completion = string_field(value, format.completion_field, where);
  } else {
    r.kind = Record::Kind::text;
    r.text = string_field(value, format.text_field, where);
  }
  return r;
}

}  // namespace loom::sft
