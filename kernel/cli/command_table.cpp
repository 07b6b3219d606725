// command_table.cpp: every command and every flag of `host`, one row each, and the parser
// and help texts made from them.
#include <boost/program_options.hpp>

#include <algorithm>
#include <set>
#include <sstream>
#include <type_traits>
#include <variant>

#include "base/failure.hpp"
#include "cli/commands.hpp"

namespace po = boost::program_options;

namespace loom {
namespace {

using FlagTarget = std::variant<bool CommandLine::*, int CommandLine::*, std::string CommandLine::*,
                                std::vector<std::string> CommandLine::*>;

struct Flag {
  const char* name;   // as program_options spells it: "out,o" is --out and -o
  const char* value;  // what the value is called in usage lines; nullptr: a switch
  const char* doc;
  FlagTarget target;
};

const std::vector<Flag>& flags() {
  static const std::vector<Flag> table = {
      {"set", "KEY=VALUE", "override a manifest value, e.g. --set optimizer.lr=1e-3 (repeatable)",
       &CommandLine::overrides},
      {"json", nullptr, "print JSON instead of text", &CommandLine::json},
      {"checkpoint", "DIR", "the checkpoint (a step-N folder) to evaluate; default: the run's newest valid one",
       &CommandLine::checkpoint},
      {"all", nullptr, "describe every host table and component", &CommandLine::all},
      {"markdown", nullptr, "with --all: Markdown, as README's option reference", &CommandLine::markdown},
      {"format", "FORMAT",
       "what to write: export takes hf (a Hugging Face folder, the default) or peft (a run's LoRA adapters "
       "alone, as PEFT's adapter folder); checkpoint export takes hf-safetensors (the weights alone, the default)",
       &CommandLine::format},
      {"out,o", "PATH",
       "where to write: export's new folder (required); checkpoint export's file (default model.safetensors)",
       &CommandLine::out},
      {"dtype", "DTYPE", "export: the weights' dtype, bf16, fp16 or fp32 (default: bf16 for hf, fp32 for peft)",
       &CommandLine::dtype},
      {"merge", nullptr, "export --format hf of a run with [lora]: add each adapter's scaled B A to its base weight",
       &CommandLine::merge},
      {"max-shard-size", "SIZE", "export: the largest weights file, such as 5GB (default) or 500MB; more go to shards",
       &CommandLine::max_shard_size},
      {"nproc-per-node", "N", "ranks to start on this node", &CommandLine::nproc_per_node},
      {"nnodes", "M|MIN:MAX",
       "nodes in the run (default 1); a range MIN:MAX makes the run elastic: it starts with up to MAX nodes and "
       "goes on with as few as MIN after one is lost",
       &CommandLine::nnodes},
      {"node-rank", "R", "this node's number, 0 to M-1 (elastic runs number their nodes themselves)",
       &CommandLine::node_rank},
      {"master-addr", "A", "address of node 0, where the ranks meet (default 127.0.0.1)", &CommandLine::master_addr},
      {"master-port", "P", "port on node 0 where its launcher serves the ranks' store (default: one the kernel "
                           "assigns; required with --nnodes > 1)",
       &CommandLine::master_port},
      {"max-restarts", "K",
       "elastic: after a failure, stop every node's ranks and start them again (from the newest valid checkpoint, "
       "at the new world size) up to K times (default 0)",
       &CommandLine::max_restarts},
      {"rdzv-id", "ID", "elastic: the job's name in the store, the same on every node, so that jobs sharing a "
                        "master never mix (default none)",
       &CommandLine::rdzv_id},
      {"rdzv-timeout", "S", "elastic: seconds a round may take to gather MIN nodes (default 600)",
       &CommandLine::rdzv_timeout},
      {"rdzv-last-call", "S",
       "elastic: once MIN nodes are there, seconds to wait for more before starting with those (default 30)",
       &CommandLine::rdzv_last_call},
      {"prompt", "TEXT", "generate: the text to continue (with --chat: the one user message)", &CommandLine::prompt},
      {"chat", nullptr, "generate: render messages with the tokenizer's chat template; without --prompt, one per line of stdin",
       &CommandLine::chat},
      {"prompts", "FILE",
       "generate: one prompt per line of FILE, each answered on its own (with --chat: each a conversation of one "
       "user message); with --json one object per line, in order",
       &CommandLine::prompts},
      {"system", "TEXT", "generate --chat: a system message first", &CommandLine::system},
      {"tokenizer", "DIR", "generate: the tokenizer folder (default: the model folder); data inspect: the tokenizer that counts tokens per row",
       &CommandLine::tokenizer},
      {"column", "NAME", "data inspect: the column to count and to put in the manifest (default: text, else the first text or token-id column)",
       &CommandLine::column},
      {"rows", "N", "data inspect: rows to print (default 3)", &CommandLine::rows},
      {"max-new-tokens", "N", "generate: at most N new tokens (default 128)", &CommandLine::max_new_tokens},
      {"temperature", "T", "generate: 0 (default) is greedy; above 0 samples from softmax(logits / T)", &CommandLine::temperature},
      {"top-k", "K", "generate: sample among the K likeliest tokens (default 0: all)", &CommandLine::top_k},
      {"top-p", "P", "generate: sample among the likeliest tokens holding mass P (default 1: all)", &CommandLine::top_p},
      {"no-cache", nullptr, "generate: recompute the whole sequence each step instead of using the model's key/value cache",
       &CommandLine::no_cache},
      {"seed", "S", "generate: the sampling seed (default 0); the same seed gives the same text", &CommandLine::seed},
      {"overwrite", nullptr,
       "run: start afresh in a run folder that holds an earlier run's outputs and no checkpoint to resume from "
       "(its trackers replace their files); without it such a run is refused",
       &CommandLine::overwrite},
      {"verbose,v", nullptr, "debug logging", &CommandLine::verbose},
      {"help,h", nullptr, "print this command's help and exit", &CommandLine::help},
  };
  return table;
}

const Flag& flag(const std::string& name) {
  for (const Flag& f : flags())
    if (name == f.name || name + "," == std::string(f.name).substr(0, name.size() + 1)) return f;
  throw std::logic_error("command table names an unknown flag: " + name);
}

std::string long_name(const Flag& f) { return std::string(f.name).substr(0, std::string(f.name).find(',')); }

// The flags a command takes: its own, then --verbose and --help, which every command takes.
std::vector<const Flag*> flags_of(const Command& c) {
  std::vector<const Flag*> out;
  for (const char* name : c.flags) out.push_back(&flag(name));
  out.push_back(&flag("verbose"));
  out.push_back(&flag("help"));
  return out;
}

po::options_description describe_flags(const Command& c, CommandLine& line) {
  po::options_description out("options", 100);
  for (const Flag* f : flags_of(c)) {
    std::visit(
        [&](auto member) {
          using T = std::remove_reference_t<decltype(line.*member)>;
          if constexpr (std::is_same_v<T, bool>) out.add_options()(f->name, po::bool_switch(&(line.*member)), f->doc);
          else if constexpr (std::is_same_v<T, std::vector<std::string>>)
            out.add_options()(f->name, po::value<T>(&(line.*member))->composing()->value_name(f->value), f->doc);
          else out.add_options()(f->name, po::value<T>(&(line.*member))->value_name(f->value), f->doc);
        },
        f->target);
  }
  return out;
}

// "run MANIFEST [--set KEY=VALUE]...": the command, its arguments and its own flags.
std::string usage_of(const Command& c) {
  std::string flags_text;
  for (const char* name : c.flags) {
    const Flag& f = flag(name);
    const bool repeatable = std::holds_alternative<std::vector<std::string> CommandLine::*>(f.target);
    flags_text += " [--" + long_name(f) + (f.value ? std::string(" ") + f.value : "") + "]" + (repeatable ? "..." : "");
  }
  const std::string args = c.args;
  if (args.rfind("--", 0) == 0) return std::string(c.name) + flags_text + " " + args;  // launch: `--` ends the flags
  return std::string(c.name) + (args.empty() ? "" : " " + args) + flags_text;
}

std::string first_word(const std::string& name) { return name.substr(0, name.find(' ')); }

// "run, validate, plugins, describe, checkpoint, launch"
std::string command_words() {
  std::string out;
  std::set<std::string> seen;
  for (const Command& c : commands())
    if (seen.insert(first_word(c.name)).second) out += (out.empty() ? "" : ", ") + first_word(c.name);
  return out;
}

// The command that argv[at...] names; advances `at` past its words.
const Command& find_command(const std::vector<std::string>& argv, size_t& at) {
  const std::string word = argv[at];
  std::vector<const Command*> family;  // every command whose first word this is
  for (const Command& c : commands())
    if (first_word(c.name) == word) family.push_back(&c);
  if (family.empty()) throw usage_failure("unknown command \"" + word + "\"; commands: " + command_words());
  ++at;
  if (family.size() == 1 && std::string(family[0]->name) == word) return *family[0];
  const std::string sub = at < argv.size() ? argv[at] : "";
  for (const Command* c : family)
    if (std::string(c->name) == word + " " + sub) {
      ++at;
      return *c;
    }
  std::string usages;
  for (const Command* c : family) usages += (usages.empty() ? "usage: host " : " | host ") + usage_of(*c);
  throw usage_failure(usages);
}

}  // namespace

const Command* parse_command_line(const std::vector<std::string>& argv, CommandLine& line, bool& version) {
  size_t at = 0;
  for (; at < argv.size() && argv[at].rfind("-", 0) == 0; ++at) {  // options before any command
    if (argv[at] == "--help" || argv[at] == "-h") line.help = true;
    else if (argv[at] == "--version") version = true;
    else if (argv[at] == "--verbose" || argv[at] == "-v") line.verbose = true;
    else throw usage_failure("unknown option " + argv[at] + " before the command; see host --help");
  }
  if (at == argv.size() || line.help || version) return nullptr;
  const Command& command = find_command(argv, at);

  std::vector<std::string> rest(argv.begin() + static_cast<std::ptrdiff_t>(at), argv.end());
  if (const auto dashes = std::find(rest.begin(), rest.end(), "--"); dashes != rest.end()) {
    line.child_args.assign(dashes + 1, rest.end());  // taken as they are: the child parses them
    rest.erase(dashes, rest.end());
  }
  po::options_description visible = describe_flags(command, line);
  po::options_description all;
  all.add(visible).add_options()("args", po::value<std::vector<std::string>>(&line.args), "");
  po::positional_options_description positional;
  positional.add("args", -1);
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(rest).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw usage_failure(std::string(command.name) + ": " + e.what() + "; see host " + command.name + " --help");
  }
  if (line.help) return &command;
  if (line.args.size() < command.min_args || line.args.size() > command.max_args)
    throw usage_failure("usage: host " + usage_of(command));
  return &command;
}

std::string command_help(const Command& command) {
  CommandLine scratch;
  std::ostringstream out;
  out << "usage: host " << usage_of(command) << "\n\n" << command.summary << "\n\n"
      << describe_flags(command, scratch);
  return out.str();
}

std::string global_help() {
  std::ostringstream out;
  out << "usage: host <command> [options]\n\ncommands:\n";
  for (const Command& c : commands()) {
    const std::string usage = usage_of(c);
    out << "  " << usage << "\n" << std::string(6, ' ') << c.summary << "\n";
  }
  out << R"(
`host COMMAND --help` shows a command's options.

options:
  --verbose, -v     debug logging (any command takes it too)
  --version         print versions and exit
  --help, -h        print this help and exit

Plugins are searched in the manifest's [plugins] paths, then LOOM_PLUGIN_PATH, then the
folder ../lib/loom/plugins beside this binary.

exit codes: 0 success, 1 runtime failure, 2 bad manifest or usage, 3 plugin load or ABI error
)";
  return out.str();
}

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"run", "MANIFEST", "train as the manifest says", 1, 1, {"set", "overwrite"}, &command_run},
      {"validate", "MANIFEST", "check a manifest and print it resolved, every default filled in", 1, 1, {"set"},
       &command_validate},
      {"eval", "MANIFEST",
       "evaluate a checkpoint's model (the newest, or --checkpoint; with none yet, the model as the manifest "
       "builds it) on the manifest's [eval_data], without training; prints every metric", 1, 1,
       {"set", "checkpoint", "json"}, &command_eval},
      {"plugins", "", "list plugins, their components, and the files that failed to load", 0, 0, {"json"},
       &command_plugins},
      {"describe", "[NAME]",
       "show a component's options, or a host table's (run, model, checkpoint, trackers, eval_data, export, "
       "distributed, lora); "
       "--all: every one",
       0, 1, {"all", "markdown"}, &command_describe},
      {"export", "RUN_OR_CHECKPOINT",
       "write a model as a Hugging Face folder (config.json, safetensors, tokenizer files) that from_pretrained "
       "loads (a run with [lora]: --merge, or --format peft for the adapters alone); RUN_OR_CHECKPOINT: a run "
       "folder (its newest valid checkpoint) or a step-N folder",
       1, 1, {"format", "out", "dtype", "max-shard-size", "merge"}, &command_export},
      {"generate", "MODEL",
       "text from a model: MODEL is a Hugging Face folder, a run folder or a step-N folder; --prompt TEXT, or "
       "--prompts FILE (one per line), or --chat with the tokenizer's chat template; greedy or sampled (--temperature, --top-k, --top-p, --seed)",
       1, 1, {"prompt", "prompts", "chat", "system", "tokenizer", "max-new-tokens", "temperature", "top-k", "top-p", "seed", "no-cache", "json"},
       &command_generate},
      {"checkpoint inspect", "DIR", "list a checkpoint's tensors, step and validity", 1, 1, {"json"},
       &command_checkpoint_inspect},
      {"checkpoint export", "DIR", "write a checkpoint's model weights alone", 1, 1, {"format", "out"},
       &command_checkpoint_export},
      {"data inspect", "PATH",
       "what Parquet or Arrow files hold (files, columns, rows, tokens per row) and the [data] table that trains on them", 1, 1,
       {"column", "rows", "tokenizer"}, &command_data_inspect},
      {"launch", "-- run MANIFEST [--set KEY=VALUE]...",
       "start the ranks of a data-parallel run on this node (what torchrun does, without Python)", 0, 0,
       {"nproc-per-node", "nnodes", "node-rank", "master-addr", "master-port", "max-restarts", "rdzv-id", "rdzv-timeout",
        "rdzv-last-call"},
       &command_launch},
  };
  return table;
}

}  // namespace loom
