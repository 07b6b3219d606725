// `host describe`: options tables generated from the declared schemas, for one name or for
// everything (`--all`), as text or as the Markdown that README's option reference is made of.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "abi/plugin_loader.hpp"
#include "base/failure.hpp"
#include "cli/commands.hpp"
#include "config/host_tables.hpp"
#include "config/options.hpp"

namespace loom {
namespace {

std::string default_of(const OptionSpec& o) {
  return o.required ? std::string("(required)") : o.default_text ? *o.default_text : std::string("(unset)");
}

void print_text(const std::vector<OptionSpec>& options) {
  if (options.empty()) {
    std::cout << "  (no options)\n";
    return;
  }
  size_t name_width = 8, default_width = 9;  // columns as wide as their longest entry
  for (const auto& o : options) {
    name_width = std::max(name_width, o.name.size() + 2);
    default_width = std::max(default_width, default_of(o).size() + 2);
  }
  std::cout << "  " << std::left << std::setw(int(name_width)) << "option" << std::setw(8) << "type"
            << std::setw(int(default_width)) << "default" << "doc\n";
  for (const auto& o : options)
    std::cout << "  " << std::setw(int(name_width)) << o.name << std::setw(8) << option_type_name(o)
              << std::setw(int(default_width)) << default_of(o) << o.doc << "\n";
}

// A table cell: '|' would end the cell, a newline the row, and '<' could open an HTML tag.
std::string cell(std::string text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '<') out += "&lt;";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

void print_markdown(const std::vector<OptionSpec>& options) {
  if (options.empty()) {
    std::cout << "No options.\n";
    return;
  }
  std::cout << "| option | type | default | |\n| --- | --- | --- | --- |\n";
  for (const auto& o : options) {
    const std::string def = o.required ? "required" : o.default_text ? "`" + *o.default_text + "`" : "unset";
    std::cout << "| " << o.name << " | " << option_type_name(o) << " | " << cell(def) << " | " << cell(o.doc)
              << " |\n";
  }
}

// Components of every loaded plugin, by kind and then name, so the output is stable.
std::vector<const Component*> components_in_order(const Registry& registry) {
  std::vector<const Component*> out;
  for (const auto& p : registry.plugins())
    if (p.error.empty()) out.insert(out.end(), p.components.begin(), p.components.end());
  std::sort(out.begin(), out.end(), [](const Component* a, const Component* b) {
    return a->kind != b->kind ? a->kind < b->kind : a->name < b->name;
  });
  return out;
}

void describe_all(const Registry& registry, bool markdown) {
  for (const HostTableDoc& t : host_table_docs()) {
    if (markdown) {
      std::cout << "\n#### `" << t.title << "`\n\n" << t.summary << "\n\n";
      print_markdown(t.options);
    } else {
      std::cout << t.title << " (host): " << t.summary << "\n";
      print_text(t.options);
      std::cout << "\n";
    }
  }
  for (const Component* c : components_in_order(registry)) {
    if (markdown) {
      std::cout << "\n#### " << kind_name(c->kind) << " `" << c->name << "`\n\n"
                << c->summary << " (plugin `" << c->plugin->name << "` " << c->plugin->version << ", "
                << (c->plugin->fingerprint.empty() ? "torch-free" : "torch-linked") << ")\n\n";
      print_markdown(c->options);
    } else {
      std::cout << c->name << " (" << kind_name(c->kind) << ") from " << c->plugin->path << "\n  " << c->summary
                << "\n";
      print_text(c->options);
      std::cout << "\n";
    }
  }
}

}  // namespace

int command_describe(const CommandLine& line) {
  const bool all = line.all;
  if (all && !line.args.empty())
    throw usage_failure("describe: give NAME or --all, not both (host describe --help)");
  Registry registry;
  load_plugins(registry, plugin_search_path({}), /*keep_going=*/true);
  if (all) {
    describe_all(registry, line.markdown);
    return 0;
  }
  const std::vector<HostTableDoc> host_tables = host_table_docs();
  if (line.args.empty()) {  // what there is to describe
    std::cout << "host tables:\n";
    for (const HostTableDoc& t : host_tables) std::cout << "  " << std::left << std::setw(14) << t.name << t.summary << "\n";
    for (const KindInfo& kind : kinds()) {
      const auto names = registry.names(kind.kind);
      if (names.empty()) continue;
      std::cout << kind_name(kind.kind) << "s:\n";
      for (const auto& n : names) std::cout << "  " << std::left << std::setw(14) << n << registry.lookup(kind.kind, n)->summary << "\n";
    }
    std::cout << "host describe NAME shows one's options; host describe --all, every one\n";
    return 0;
  }
  const std::string name = line.args[0];
  for (const HostTableDoc& t : host_tables) {
    if (name != t.name) continue;
    std::cout << t.title << " (host): " << t.summary << "\n";
    print_text(t.options);
    return 0;
  }
  const auto matches = registry.named(name);
  if (matches.empty()) {
    std::vector<std::string> known;
    for (const HostTableDoc& t : host_tables) known.push_back(t.name);
    for (const KindInfo& kind : kinds())
      for (const auto& n : registry.names(kind.kind)) known.push_back(n);
    throw usage_failure("describe: no component named \"" + name + "\"" + did_you_mean(name, known) +
                        " (`host plugins` lists every component; `host describe --all` describes them all)");
  }
  for (const Component* c : matches) {
    std::cout << c->name << " (" << kind_name(c->kind) << ") from " << c->plugin->path << "\n  " << c->summary << "\n";
    print_text(c->options);
  }
  return 0;
}

}  // namespace loom
