// sft_records.hpp: instruction data as JSON Lines. Each non-blank line is one sample in one of
// three shapes (`format = "auto"` picks by the fields a line has):
//   messages           {"messages": [{"role": "user", "content": "..."}, ...]}  (OpenAI style)
//   prompt_completion  {"prompt": "...", "completion": "..."}
//   text               {"text": "..."}
// Field names are configurable. A line that is not JSON or lacks the fields is a BadLine naming
// the file and line; the caller decides (on_bad_line) whether that ends the run or is skipped.
// Torch-free, SDK-free.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace loom::sft {

struct RecordFormat {
  std::string format = "auto";  // auto | messages | prompt_completion | text
  std::string messages_field = "messages", prompt_field = "prompt", completion_field = "completion",
              text_field = "text";
};

struct Message {
  std::string role, content;
  nlohmann::json extra;  // the message's other keys (tool_calls, reasoning_content, ...), for the template
};

struct Record {
  enum class Kind { messages, prompt_completion, text } kind = Kind::text;
  std::vector<Message> messages;    // messages
  std::string prompt, completion;   // prompt_completion
  std::string text;                 // text
  std::string where;                // "FILE line N"
};

struct BadLine : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The sample on one line (already known not to be blank); throws BadLine.
Record parse_record(const std::string& line, const RecordFormat& format, const std::string& where);

// Checks `format.format` names a shape; throws std::invalid_argument with the fix otherwise.
void check_format(const RecordFormat& format);

}  // namespace loom::sft
