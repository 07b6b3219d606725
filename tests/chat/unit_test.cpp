// unit_test.cpp: each construct on small templates with outputs known by hand, the built-in
// templates, and templates that must fail with one line naming the line and construct.
#include <doctest/doctest.h>

#include "chat/builtin_templates.hpp"
#include "chat/chat_template.hpp"

using loom::chat::ChatTemplate;
using loom::chat::TemplateError;
using nlohmann::json;

namespace {

std::string render(const std::string& source, const json& context = json::object()) { return ChatTemplate(source).render(context); }

std::string error_of(const std::string& source, const json& context = json::object()) {
  try {
    render(source, context);
  } catch (const TemplateError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("expressions, filters, tests and methods") {
  CHECK(render("{{ 1 + 2 * 3 }}|{{ 7 // 2 }}|{{ 7 % 3 }}|{{ 1.5 + 1 }}|{{ 2.0 }}") == "7|3|1|2.5|2.0");
  CHECK(render("{{ 'a' ~ 1 }}{{ 'b' + 'c' }}{{ [1, 2] + [3] }}") == "a1bc[1, 2, 3]");
  CHECK(render("{{ x | default('none') }} {{ 'AbC' | lower }} {{ '  t  ' | trim }}|") == "none abc t|");
  CHECK(render("{{ items | length }} {{ items[-1] }} {{ items[::-1] }} {{ items[1:] }}", {{"items", {1, 2, 3}}}) == "3 3 [3, 2, 1] [2, 3]");
  CHECK(render("{{ m | tojson }}", {{"m", {{"b", 1}, {"a", "é\n"}}}}) == "{\"a\": \"é\\n\", \"b\": 1}");
  CHECK(render("{{ m | tojson(indent=2) }}", {{"m", {{"a", {1, 2}}}}}) == "{\n  \"a\": [\n    1,\n    2\n  ]\n}");
  CHECK(render("{{ s.startswith('ab') }} {{ s.split('b') }} {{ s.upper() }} {{ s.replace('a', 'x') }}", {{"s", "abcab"}}) ==
        "true [\"a\", \"ca\", \"\"] ABCAB xbcxb");
  CHECK(render("{{ '  x  '.strip('x') }}|") == "  x  |");  // Python strips only the given characters
  CHECK(render("{{ '\\nxx\\n'.lstrip('\\n') }}|{{ 'abca'.strip('a') }}|{{ ' \xC2\x85" "a'.strip() }}") == "xx\n|bc|a");
  CHECK(render("{% for m in ms | selectattr('t', 'undefined') %}{{ m.r }}{% endfor %}", {{"ms", {{{"r", "a"}}, {{"r", "b"}, {"t", 1}}}}}) == "a");
  CHECK(render("{% if x is iterable %}I{% endif %}{% for a in x %}A{% endfor %}|{{ x | trim }}|") == "I||");  // undefined x
  CHECK(render("{{ x is defined }} {{ y is none }} {{ 3 is odd }} {{ 'a' is string }} {{ z is not defined }}",
               {{"x", 1}, {"y", nullptr}}) == "true true true true true");
  CHECK(render("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in m }} {{ 'q' not in m }}", {{"m", {{"k", 1}}}}) == "true true true true");
  CHECK(render("{{ 'yes' if flag else 'no' }}", {{"flag", false}}) == "no");
  CHECK(render("{{ m.get('k') }} {{ m.items() | list | length }}", {{"m", {{"k", "v"}}}}) == "v 1");
  CHECK(render("{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }}",
               {{"ms", {{{"role", "user"}, {"content", "a"}}, {{"role", "bot"}, {"content", "b"}}, {{"role", "user"}, {"content", "c"}}}}}) ==
        "a,c");
}

TEST_CASE("statements: set, namespace, if/elif/else, for with loop variables, filters, else, break") {
  CHECK(render("{% set x = 2 %}{% if x > 3 %}big{% elif x > 1 %}mid{% else %}small{% endif %}") == "mid");
  CHECK(render("{% for k, v in m.items() %}{{ loop.index }}{{ k }}={{ v }}{% if not loop.last %},{% endif %}{% endfor %}",
               {{"m", {{"a", 1}, {"b", 2}}}}) == "1a=1,2b=2");
  CHECK(render("{% for x in xs if x is odd %}{{ x }}{% else %}none{% endfor %}", {{"xs", {1, 2, 3}}}) == "13");
  CHECK(render("{% for x in xs %}{{ x }}{% else %}none{% endfor %}", {{"xs", json::array()}}) == "none");
  CHECK(render("{% for x in xs %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}", {{"xs", {1, 2, 3, 4}}}) == "12");
  CHECK(render("{% set ns = namespace(n=0) %}{% for x in xs %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}", {{"xs", {1, 2, 3}}}) == "6");
  CHECK(render("{% set y = 1 %}{% for x in [1] %}{% set y = 5 %}{% endfor %}{{ y }}") == "1");  // a loop's set stays inside
  CHECK(render("{% set b %}in{{ 1 }}{% endset %}[{{ b }}]") == "[in1]");
}

TEST_CASE("whitespace control and the trim_blocks / lstrip_blocks rules") {
  CHECK(render("a  {%- if true -%}  b  {%- endif -%}  c") == "abc");
  CHECK(render("{% if true %}\nx\n{% endif %}\n") == "x\n");
  CHECK(render("  {% if true %}y{% endif %}") == "y");
  CHECK(render("{{- ' a ' -}}\n{# comment #}\nb") == " a b");
}

TEST_CASE("the built-in templates") {
  const json messages = {{{"role", "user"}, {"content", "hi"}}, {{"role", "assistant"}, {"content", " yo "}}};
  CHECK(render(loom::chat::builtin_chat_template("chatml"), {{"messages", messages}, {"add_generation_prompt", false}}) ==
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n yo <|im_end|>\n");
  CHECK(render(loom::chat::builtin_chat_template("llama3"), {{"messages", messages}, {"add_generation_prompt", true}, {"bos_token", "<B>"}}) ==
        "<B><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nyo<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n");
  CHECK(loom::chat::builtin_chat_template("nope") == nullptr);
  CHECK(loom::chat::builtin_template_names() == "chatml, llama3");
}

TEST_CASE("unsupported constructs and broken templates are one line naming the line and the construct") {
  CHECK(error_of("a\n{% macro m() %}x{% endmacro %}") == "chat template line 2: unsupported tag 'macro'");
  CHECK(error_of("{{ x | wordwrap }}", {{"x", "s"}}) == "chat template line 1: unsupported filter 'wordwrap'");
  CHECK(error_of("\n\n{{ x is divisibleby }}") == "chat template line 3: unsupported test 'divisibleby'");
  CHECK(error_of("{% if x %}never closed") .find("never closed") != std::string::npos);
  CHECK(error_of("{{ 'open string }}").find("never closed") != std::string::npos);
  CHECK(error_of("{{ raise_exception('Roles must alternate') }}") == "chat template line 1: Roles must alternate");
  for (const std::string& bad : {error_of("{% macro m() %}"), error_of("{{ 1 +")}) CHECK(bad.find('\n') == std::string::npos);
}

TEST_CASE("hostile templates fail with an error instead of crashing or hanging") {
  CHECK(error_of("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}").find("nests deeper") != std::string::npos);
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  CHECK(error_of(ifs).find("nests deeper") != std::string::npos);
  CHECK(error_of("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}").find("steps") != std::string::npos);
  CHECK(error_of("{% set s = 'xxxxxxxxxxxxxxxx' %}{% for i in range(100000) %}{% set s = s + s %}{% endfor %}{{ s }}").find("64 MiB") !=
        std::string::npos);
}
