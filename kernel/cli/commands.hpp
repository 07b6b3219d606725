// commands.hpp: the host's commands, one row each in the command table (command_table.cpp):
// name, arguments, summary, the flags it takes and its handler. The table generates
// `host --help`, each `host COMMAND --help`, and refuses flags a command does not take.
// Handlers return the process exit code or throw Failure.
#pragma once

#include <string>
#include <vector>

namespace loom {

// What the command line said; each command reads the fields of the flags it takes.
struct CommandLine {
  std::vector<std::string> args;       // positional arguments after the command name
  std::vector<std::string> overrides;  // --set KEY=VALUE, in order
  bool json = false, all = false, markdown = false, verbose = false, help = false;
  bool overwrite = false;              // run: start afresh over an earlier run's outputs
  std::string format, out;             // export and checkpoint export; empty: the command's default
  std::string dtype, max_shard_size = "5GB";  // export; dtype empty: the format's default
  bool merge = false;                         // export --format hf: fold LoRA adapters into the weights
  std::string checkpoint;              // eval: a step-N folder; empty: the run's newest
  // launch
  int nproc_per_node = 1, node_rank = 0;
  std::string nnodes = "1";            // "M", or "MIN:MAX" for an elastic run
  std::string master_addr = "127.0.0.1";
  int master_port = 0;                 // 0: a free port (single node only)
  int max_restarts = 0;                // elastic: restarts after failures before giving up
  std::string rdzv_id;                 // elastic: the job's name in the store
  int rdzv_timeout = 600, rdzv_last_call = 30;  // elastic: seconds to gather MIN nodes; to wait for more
  std::vector<std::string> child_args;  // after `--`: the command every rank runs
  // generate
  std::string prompt, prompts, system, tokenizer, temperature = "0", top_p = "1";
  bool chat = false, no_cache = false;
  int max_new_tokens = 128, top_k = 0, seed = 0;
  // data inspect
  std::string column;                  // empty: "text", else the first text or token-id column
  int rows = 3;                        // rows printed
};

struct Command {
  const char* name;     // "run", or "checkpoint inspect" for a subcommand
  const char* args;     // "MANIFEST": the positional arguments, for usage lines
  const char* summary;  // one line for `host --help`
  size_t min_args, max_args;
  std::vector<const char*> flags;  // names in the flag table: "set", "json"
  int (*handler)(const CommandLine&);
};

// Every command, in the order `host --help` lists them.
const std::vector<Command>& commands();

// Parses argv (after the program name) into the command it names and its flags and
// arguments; returns nullptr for `host --help` and `host --version` (set in `line`). Throws a
// usage Failure naming the command and its --help for anything it does not take.
const Command* parse_command_line(const std::vector<std::string>& argv, CommandLine& line, bool& version);

// `host --help` and `host COMMAND --help`.
std::string global_help();
std::string command_help(const Command& command);

// The handlers.
int command_run(const CommandLine& line);
int command_validate(const CommandLine& line);
int command_eval(const CommandLine& line);
int command_plugins(const CommandLine& line);
int command_describe(const CommandLine& line);
int command_launch(const CommandLine& line);
int command_checkpoint_inspect(const CommandLine& line);
int command_checkpoint_export(const CommandLine& line);
int command_export(const CommandLine& line);
int command_generate(const CommandLine& line);
int command_data_inspect(const CommandLine& line);

}  // namespace loom
