#include "config/host_tables.hpp"

namespace loom {

Rule<std::string> one_of(std::vector<std::string> choices) {
  return [choices](const std::string& v) {
    std::string list;
    for (size_t i = 0; i < choices.size(); ++i) {
      if (v == choices[i]) return std::string();
      list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + ("\"" + choices[i] + "\"");
    }
    return "must be " + list;
  };
}

namespace {

// One safe path component: "..", "." or a slash would put the run outside run.dir, and control
// characters make folder names that terminals and scripts mangle.
const Rule<std::string> kFolderName = [](const std::string& v) -> std::string {
  const std::string rule =
      "must be one folder name: not empty, \".\" or \"..\", no '/', '\\' or control characters, at most 255 bytes";
  if (v.empty() || v == "." || v == ".." || v.size() > 255) return rule;
  for (unsigned char c : v)
    if (c < 0x20 || c == 0x7f || c == '/' || c == '\\') return rule;
  return "";
};

// run.device: also remembers where the manifest set it, for the messages of resolve_device.
HostOption<RunSettings> device_option() {
  HostOption<RunSettings> out = option(
      "device", &RunSettings::device,
      "\"auto\" (a GPU when LibTorch sees one, else the CPU), \"cpu\", \"cuda\" or \"cuda:N\". Under a launcher, "
      "\"auto\" and \"cuda\" take the GPU numbered LOCAL_RANK.");
  out.store = [](RunSettings& s, const OptionValue& v, const std::string& where, const std::string&) {
    s.device = std::get<std::string>(v);
    s.device_at = where;
  };
  return out;
}

// run.precision: a string in the manifest, an enum in the settings.
HostOption<RunSettings> precision_option() {
  HostOption<RunSettings> out;
  out.spec = {"precision", LOOM_OPTION_TYPE_STRING, std::string(precision_name(RunSettings{}.precision)), false,
              "\"fp32\"; \"tf32\" (fp32 with TF32 tensor-core matmuls on CUDA); or \"bf16\": forward and loss under "
              "bf16 autocast, with fp32 weights, gradients and optimizer state."};
  out.store = [](RunSettings& s, const OptionValue& v, const std::string& where, const std::string&) {
    s.precision = parse_precision(std::get<std::string>(v), where);
  };
  return out;
}

}  // namespace

const HostTable<RunSettings>& run_table() {
  using S = RunSettings;
  static const HostTable<S> table{
      "run", "[run]", "The training run itself.",
      {option("name", &S::name, "Run name; the run directory is <dir>/<name>.", {kFolderName}),
       option("dir", &S::dir, "Parent of the run directory; relative paths start at the current directory."),
       option("seed", &S::seed, "Seed for initialization, data order and dropout."),
       option("steps", &S::steps, "Optimizer steps to run.", {at_least<int64_t>(1)}),
       option("epochs", &S::epochs,
              "Epochs to run instead of steps; the steps are epochs x the dataset's batches per epoch / grad_accum "
              "(rounded up), so the dataset must say how long an epoch is (token_file and text with report_epochs "
              "= true). 0 uses steps.",
              {at_least<int64_t>(0)}),
       device_option(),
       precision_option(),
       option("deterministic", &S::deterministic,
              "Deterministic LibTorch algorithms, for runs on a GPU that resume to the bit (CPU runs already do); an "
              "op without a deterministic version then fails, naming itself."),
       option("grad_accum", &S::grad_accum, "Micro-batches accumulated per optimizer step.", {at_least<int64_t>(1)}),
       option("global_batch_size", &S::global_batch_size,
              "Rows per optimizer step over all ranks; when set, grad_accum is derived from it: global_batch_size / "
              "(the data's rows per micro-batch x world size), which must divide exactly. 0 uses grad_accum.",
              {at_least<int64_t>(0)}),
       option("clip_grad_norm", &S::clip_grad_norm,
              "Clip the global gradient norm to this value; 0 turns clipping off.", {at_least(0.0)}),
       option("log_every", &S::log_every, "Hand metrics to trackers every N steps (and at the end).",
              {at_least<int64_t>(1)}),
       option("threads", &S::threads,
              "CPU threads for LibTorch ops and the BLAS; 0: the CPUs this process may use (its affinity mask, so "
              "taskset, Slurm and containers count), divided among the ranks on this machine. `host run` prints "
              "the choice.",
              {at_least<int64_t>(0)}),
       option("low_priority_helpers", &S::low_priority_helpers,
              "Run the data prefetch and checkpoint-writer threads at low priority (nice +10), so they never take a "
              "core from the step; false runs them at the step's priority."),
       option("cpu_memory_cache", &S::cpu_memory_cache,
              "Keep freed CPU memory for the next step instead of returning it to the OS (glibc malloc: no heap "
              "trimming, mmap only above 32 MiB); saves re-faulting every activation each step."),
       option("peak_flops", &S::peak_flops,
              "FLOP/s of one rank's device that MFU is measured against (with several ranks, against their "
              "sum). 0: on a GPU the table knows (H100, H200, A100) its datasheet's dense peak for run.precision, "
              "elsewhere a GEMM in that precision measured at start."),
       option("gpu_memory_gib", &S::gpu_memory_gib,
              "Cap LibTorch's CUDA caching allocator at this many GiB per process "
              "(torch.cuda.set_per_process_memory_fraction), so that a large GPU stands in for a smaller one; "
              "running out under it (or without it) stops the run with one line naming what held the memory. 0: "
              "no cap. CUDA only: refused on the CPU, and above the device's memory. Not yet run on a GPU.",
              {at_least(0.0)}),
       option("cuda_graph", &S::cuda_graph,
              "Capture each micro-batch's forward and backward as a CUDA graph on the second step and replay it "
              "after, so the host launches one graph instead of thousands of kernels (the update, clipping and "
              "logging stay outside). Needs one process on a CUDA device and batches of one shape without "
              "fields; otherwise, or when the capture fails (an op that waits for the device, as MoE routing "
              "does, or one a capture cannot hold, as activation checkpointing's save of the CUDA generator "
              "may be), the steps run as without it, after one line saying why. No effect on the CPU. Not yet run "
              "on a GPU.")}};
  return table;
}

const HostTable<CheckpointSettings>& checkpoint_table() {
  using S = CheckpointSettings;
  static const HostTable<S> table{
      "checkpoint", "[checkpoint]",
      "When to save and whether to resume; `use` picks the backend (safetensors if left out), whose own options go "
      "in the same table.",
      {option("every", &S::every, "Save every N steps; 0 saves only at the end and on signals.", {at_least<int64_t>(0)}),
       option("keep", &S::keep, "Newest checkpoints to keep; older ones are deleted after a save.",
              {at_least<int64_t>(1)}),
       option("keep_every", &S::keep_every,
              "Never delete checkpoints whose step is a multiple of this (milestones); 0: none.", {at_least<int64_t>(0)}),
       option("every_epoch", &S::every_epoch,
              "Also save after each step in which the dataset ended an epoch (finite datasets)."),
       option("at_end", &S::at_end, "Save when the run ends."),
       option("async", &S::async, "Write in a background thread while training goes on (tensors are copied first)."),
       option("resume", &S::resume,
              "\"auto\": continue from the newest valid checkpoint; \"none\": start fresh; or a checkpoint path.",
              {[](const std::string& v) { return v.empty() ? "must be \"auto\", \"none\" or a path" : ""; }}),
       option("dir", &S::dir, "Where checkpoints go; relative to the run directory."),
       option("allow_nonfinite", &S::allow_nonfinite,
              "Resume even when the checkpoint's weights or optimizer state hold NaN or infinite values (refused by "
              "default, naming the tensors; `host checkpoint inspect` counts them)."),
       option("allow_unclaimed", &S::allow_unclaimed,
              "Resume even when the checkpoint holds model or optimizer tensors that nothing in this run restores "
              "(an intentional partial load); they are named in a warning. Refused by default."),
       option("frozen", &S::frozen,
              "Frozen weights ([model] freeze, [lora]) in checkpoints: \"reference\" stores only what trains plus the "
              "checksum of the frozen weights, which a resume rebuilds from the model's source (its from folder, "
              "init_from, the seed) and checks; \"include\" stores them too, so a checkpoint stands alone.",
              {one_of({"reference", "include"})})}};
  return table;
}

const HostTable<TrackerSettings>& tracker_table() {
  static const HostTable<TrackerSettings> table{
      "trackers", "[[trackers]]", "Taken by every tracker table, besides the tracker's own options.",
      {option("required", &TrackerSettings::required,
              "End the run when this tracker fails; by default a failure is a warning and the tracker stops."),
       option("every_rank", &TrackerSettings::every_rank,
              "Create and call this tracker on every rank of a multi-process run (its context says which rank); by "
              "default only rank 0 has trackers, and it logs metrics already reduced over the ranks.")}};
  return table;
}

const HostTable<ModelInitSettings>& model_table() {
  using S = ModelInitSettings;
  static const HostTable<S> table{
      "model", "[model]", "The model (`use` plus its options), and:",
      {option("init_from", &S::init_from,
              "Start from these weights: a Hugging Face folder (config.json + safetensors), a Loom checkpoint "
              "(a step-N folder), or with [lora] a PEFT adapter folder (adapter_config.json + "
              "adapter_model.safetensors; its r and lora_alpha must equal [lora]'s) on top of the model's base. "
              "Weights only, for a new stage such as instruction tuning after pretraining: "
              "optimizer, schedule, RNG and data start fresh. Empty: the model's own initialisation.",
              {}),
       option("init_strict", &S::init_strict,
              "With init_from: refuse weights with missing, unexpected or mis-shaped tensors. false: load what "
              "matches and log the rest.",
              {}),
       option("freeze", &S::freeze,
              "Parameters that do not train, as name patterns: a pattern with * matches whole names (* stands for "
              "any characters, dots included), one without matches every name containing it (\"layers.0.\" is "
              "layer 0, not layer 10). Frozen parameters take no gradient, optimizer state or all-reduce traffic. A "
              "pattern that matches nothing is an error; the start of the run lists what each matched.",
              {}),
       option("frozen_dtype", &S::frozen_dtype,
              "Dtype frozen floating-point parameters are kept in: \"fp32\", or \"bf16\" (half the memory; only "
              "with run.precision = \"bf16\", whose autocast computes in bf16 anyway).",
              {one_of({"fp32", "bf16"})})}};
  return table;
}

const HostTable<EvalSettings>& eval_data_table() {
  static const HostTable<EvalSettings> table{
      "eval_data", "[eval_data]", "A dataset for evaluation (`use` plus its options), and:",
      {option("max_batches", &EvalSettings::max_batches,
              "Batches per evaluation; the same batches every time, so evaluations compare. A finite evaluation set "
              "(one that ends its epoch, as criteo_tsv does) is read whole when it has fewer.",
              {at_least<int64_t>(1)})}};
  return table;
}

const HostTable<ExportSettings>& export_table() {
  using S = ExportSettings;
  static const HostTable<S> table{
      "export", "[export]",
      "Hugging Face folders of the model written during training, as `host export` writes them (the model must "
      "be a Hugging Face architecture). Each appears whole at DIR/step-N.",
      {option("every", &S::every, "Steps between exports; 0: only at the end.", {at_least<int64_t>(0)}),
       option("keep", &S::keep, "Newest export folders kept; older ones are deleted. 0: keep all.",
              {at_least<int64_t>(0)}),
       option("at_end", &S::at_end, "Also export after the last step.", {}),
       option("dir", &S::dir, "Folder of the exports, relative to the run folder unless absolute.", {}),
       option("dtype", &S::dtype, "Dtype of the exported weights.", {one_of({"bf16", "fp16", "fp32"})}),
       option("max_shard_size", &S::max_shard_size, "Largest weights file, such as 5GB or 500MB.", {})}};
  return table;
}

const HostTable<AdapterSettings>& lora_table() {
  using S = AdapterSettings;
  static const HostTable<S> table{
      "lora", "[lora]",
      "LoRA adapters (Hu et al. 2021) on the model's linear layers: y = W x + (alpha / rank) B A x, with A random "
      "and B zero, so training starts from the base model exactly. Only the adapters train; the rest is frozen "
      "(see [model] frozen_dtype). The model plugin must register its linear layers with add_linear "
      "(sdk/README.md); gpt, llama and hf_causal_lm do.",
      {option("targets", &S::targets,
              "Module names to adapt, as PEFT's target_modules: a module matches when its name equals a target or "
              "ends with \".\" and the target (q_proj, v_proj; GPT-2: c_attn, c_proj, c_fc). Each must match.",
              {[](const std::vector<std::string>& v) { return v.empty() ? std::string("must name at least one module") : ""; }}),
       option("rank", &S::rank, "The adapters' rank r.", {at_least<int64_t>(1)}),
       option("alpha", &S::alpha, "Scale numerator: the adapter's output is multiplied by alpha / rank.",
              {above(0.0)}),
       option("dropout", &S::dropout, "Dropout on each adapter's input while training.",
              {[](const double& v) { return v >= 0.0 && v < 1.0 ? std::string() : std::string("must be in [0, 1)"); }})}};
  return table;
}

const HostTable<DistributedSettings>& distributed_table() {
  using S = DistributedSettings;
  static const HostTable<S> table{
      "distributed", "[distributed]", "Data-parallel settings, read when the run has more than one rank.",
      {option("backend", &S::backend, "\"gloo\" (CPU tensors), \"nccl\" (CUDA tensors) or \"auto\" (by run.device).",
              {one_of({"auto", "gloo", "nccl"})}),
       option("bucket_mb", &S::bucket_mb, "Gradient all-reduce bucket size in MB.", {above(0.0)}),
       option("timeout_s", &S::timeout_s,
              "Seconds to wait for the other ranks (meeting, every collective) before failing the run.",
              {above(0.0)}),
       option("shard", &S::shard,
              "What the ranks split instead of each holding it whole: \"none\" (replicated), \"optimizer\" "
              "(ZeRO-1: each rank keeps and updates 1/N of the optimizer state, then parameters are all-gathered), "
              "\"gradients\" (ZeRO-2: gradients are also reduced only to the rank that owns them) or "
              "\"parameters\" (ZeRO-3: also the weights of each layer, gathered just before the layer runs; CPU and "
              "CUDA, models that declare units: gpt, llama, hf_causal_lm). Checkpoints are then written by every rank in "
              "parallel; any mode resumes any other at any world size. README \"Sharding\" has the measured "
              "trade-offs.",
              {one_of({"none", "optimizer", "gradients", "parameters"})}),
       option("offload", &S::offload,
              "\"optimizer\" (ZeRO-Offload): the optimizer updates a copy of this rank's parameters (its slice with "
              "shard) in host memory, pinned on CUDA, so its state (AdamW: 8 bytes a parameter) never takes device "
              "memory; each step the clipped gradients go to the host, the update runs on the CPU and the parameters "
              "come back, piece by piece (offload_piece_mb) so that the copies overlap the update; in one process a "
              "piece leaves as soon as the backward has made all its gradients. Checkpoints are the same as without "
              "it, and resume either way. Not yet with tensor, sequence, context, expert or pipeline parallelism, nor "
              "sparse tables; the update itself waits for the backward's end (clipping needs the global norm). On the "
              "CPU it saves no memory. README \"Optimizer offload\".",
              {one_of({"none", "optimizer"})}),
       option("offload_piece_mb", &S::offload_piece_mb,
              "With offload: the MB of each parameter group that go to the host, are updated and come back at once. "
              "On CUDA one piece's copies overlap the CPU's update of the next; the result is the same whatever the "
              "size. Only for an optimizer that updates element by element (adamw, sgd: LOOM_OPTIMIZER_ELEMENTWISE); "
              "any other is updated whole after every copy arrived.",
              {above(0.0)}),
       option("tensor_parallel", &S::tensor_parallel,
              "Ranks per tensor-parallel group (Megatron-LM's layout): each holds 1/T of every attention head "
              "set, MLP width and vocabulary of the model and sees the same batches; the world size must be a "
              "multiple of it, and data parallelism (with shard) runs over the rest. Models: llama, gpt and "
              "hf_causal_lm (Llama family and GPT-2). Checkpoints, sharded or not, and [export] hold whole tensors and "
              "resume on any layout; [lora] adapters follow the split. Not yet with dropout. README \"Tensor "
              "parallelism\".",
              {at_least<int64_t>(1)}),
       option("sequence_parallel", &S::sequence_parallel,
              "Ranks per sequence-parallel group (DeepSpeed-Ulysses): each takes 1/S of every row's positions and "
              "sees the same batches; around attention an all-to-all trades sequence pieces for head pieces, so "
              "each rank attends over whole rows (packed documents included) for 1/S of the heads. The world size "
              "must be a multiple of tensor_parallel x sequence_parallel; data parallelism (with shard) runs over "
              "the rest. Models: llama, gpt and hf_causal_lm; S must divide the query heads of each tensor "
              "piece and the rows' positions. Not yet with dropout. README \"Sequence parallelism\".",
              {at_least<int64_t>(1)}),
       option("context_parallel", &S::context_parallel,
              "Ranks per context-parallel group (ring attention): rows are cut into 2C chunks and each rank "
              "takes chunks r and 2C-1-r (one from each end, so causal work is even) and sees the same batches; "
              "each attention layer passes the keys and values around the group C-1 times and merges the "
              "blocks with their log-sum-exp, so each rank attends its chunks over whole rows (grouped-query "
              "heads, sliding windows and packed documents included). No head count limits it, unlike "
              "sequence_parallel, with which it does not combine. The world size must be a multiple of "
              "tensor_parallel x context_parallel (x pipeline_parallel: each stage has its rings); data "
              "parallelism (with shard) runs over the rest. Models: llama, gpt and hf_causal_lm (no mixture of "
              "experts); 2C must divide the rows' positions. Not yet "
              "with dropout. README \"Context parallelism\".",
              {at_least<int64_t>(1)}),
       option("pipeline_parallel", &S::pipeline_parallel,
              "Pipeline stages (GPipe, PipeDream-Flush): the model's layers are cut into P stages in order, "
              "rank r of a pipeline computes stage r, and each micro-batch of the step ([run] grad_accum or "
              "global_batch_size) flows through them, hidden states sent forward and their gradients back with "
              "c10d point-to-point. The stages see the same batches; the loss, gradient norm and clipping are one "
              "process's. Each stage holds its own layers' parameters, gradients and optimizer state and those "
              "outside layers (embedding, final norm, output layer); shard = \"optimizer\" or \"gradients\" "
              "cuts a stage's layers among its replicas, tensor_parallel into pieces, frozen weights ([lora], "
              "[model] freeze) included; on the CPU a stage is built with its own layers only. "
              "Checkpoints are one process's and resume at any P. The world size must be "
              "a multiple of tensor_parallel x pipeline_parallel (x sequence_parallel or context_parallel: each "
              "stage cuts its rows over its own group); data parallelism (with shard = \"optimizer\" or "
              "\"gradients\") runs over the rest. Models: gpt, llama and dense hf_causal_lm; not with "
              "expert_parallel, shard = \"parameters\" or row-sharded tables. README \"Pipeline parallelism\".",
              {at_least<int64_t>(1)}),
       option("pipeline_schedule", &S::pipeline_schedule,
              "The order of each stage's forward and backward passes: \"gpipe\" (every forward, then every "
              "backward: the stage holds every micro-batch's activations), \"1f1b\" (one forward, one backward "
              "after a warm-up: the same bubble, (P-1)/(m+P-1) of the step, holding at most P - r micro-batches) or "
              "\"interleaved_1f1b\" (pipeline_chunks chunks per stage: bubble (P-1)/(v m+P-1); the micro-batches "
              "must be a multiple of P).",
              {one_of({"gpipe", "1f1b", "interleaved_1f1b"})}),
       option("pipeline_chunks", &S::pipeline_chunks,
              "Model chunks per stage for pipeline_schedule = \"interleaved_1f1b\" (virtual stage c P + r on rank "
              "r); 1 for the other schedules.",
              {at_least<int64_t>(1)}),
       option("pipeline_split_points", &S::pipeline_split_points,
              "The cut as a list instead of by cost: the first layer of every stage after the first, as torchtitan "
              "writes them (\"layers.5\" starts the second stage at layer 5), increasing; pipeline_parallel x "
              "pipeline_chunks - 1 of them. Empty: the cut by cost."),
       option("pipeline_embedding_cost", &S::pipeline_embedding_cost,
              "What the embedding weighs, in layers, when the layers are cut into stages (the first stage holds "
              "it): the cut makes the slowest stage as fast as it can.",
              {at_least<double>(0.0)}),
       option("pipeline_head_cost", &S::pipeline_head_cost,
              "What the output layer and the loss weigh, in layers, on the last stage (a large vocabulary's output "
              "layer can weigh several layers).",
              {at_least<double>(0.0)}),
       option("expert_parallel", &S::expert_parallel,
              "Data-parallel ranks per expert-parallel group (GShard's layout) for mixture-of-experts models: "
              "each reads its own batches and computes 1/E of every sparse layer's experts, for the tokens of "
              "every rank of its group, which an all-to-all sends to it and a second sends back. It must divide "
              "the world size and the experts. Each rank holds only its experts' weights, gradients and "
              "optimizer state; checkpoints and exports hold every expert and resume on any E. Models: "
              "hf_causal_lm with Qwen2-MoE, Qwen3-MoE or Mixtral; not with tensor_parallel, sequence_parallel, "
              "context_parallel or shard = \"parameters\". README "
              "\"Mixtures of experts\".",
              {at_least<int64_t>(1)}),
       option("sparse_tables", &S::sparse_tables,
              "Where the rows of the model's sparse tables live: \"replicated\" (every rank holds every table and "
              "the ranks sum each step's (row, value) gradient pairs) or \"row_sharded\" (rank r of N holds rows "
              "r R/N .. (r+1) R/N - 1 of each table of R rows and their optimizer state; each step sends the ids a "
              "rank looks up to their owners and the rows back, one all-to-all each way, and the gradient rows "
              "back to the owners in backward). Models: dlrm. Each rank writes its rows into its part of a "
              "checkpoint; checkpoints resume on either setting and at any rank count; evaluation runs on every "
              "rank together; init_from loads each rank's rows. Row-sharded runs do not yet take [export] or a "
              "sharded save, nor tensor, sequence or expert parallelism. README \"Sharded embedding tables\".",
              {one_of({"replicated", "row_sharded"})})}};
  return table;
}

std::vector<HostTableDoc> host_table_docs() {
  std::vector<HostTableDoc> out;
  const auto add = [&](const auto& t) { out.push_back({t.name, t.title, t.summary, t.specs()}); };
  add(run_table());
  add(checkpoint_table());
  add(tracker_table());
  add(model_table());
  add(eval_data_table());
  add(export_table());
  add(distributed_table());
  add(lora_table());
  return out;
}

}  // namespace loom
