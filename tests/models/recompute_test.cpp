// Activation checkpointing (activation_checkpointing = "full" | "every_n") in gpt and llama:
// the gradients of every parameter and the loss are those of the run that keeps every
// activation, with dropout on (the recomputation replays the random numbers), and the random
// numbers drawn after the step are the same too.
#include "torch_doctest.hpp"  // before any torch or doctest header

#include "model_harness.hpp"
#include "train/flat_params.hpp"

using namespace loom_test;

namespace {

struct Step {
  double loss;
  std::map<std::string, at::Tensor> grads;
  at::Tensor next_random;  // the first number drawn after the step
};

// frozen: parameters whose names contain it do not train (as [model] freeze and [lora] leave
// the embeddings), so the first block's input carries no gradient.
Step train_step(const std::string& component, toml::table options, const std::string& frozen = "") {
  auto model = make_model(component, options);
  randomize(*model, 3);
  model->set_training(true);
  std::vector<loom::ModelParam> params;
  for (const loom::ModelParam& p : model->params()) {
    if (!frozen.empty() && p.name.find(frozen) != std::string::npos) {
      p.tensor->requires_grad_(false);
      continue;
    }
    params.push_back(p);
  }
  loom::FlatParams flat(params);  // gradients land in the host's flat buffer, as in a run
  at::manual_seed(11);
  const at::Tensor x = tokens(3, 8, 32, 4), y = tokens(3, 8, 32, 5);
  const at::Tensor loss = model->loss_sum(x, y);
  loss.backward();
  Step out{loss.item<double>(), {}, at::rand({4})};
  for (const loom::ModelParam& p : params) out.grads[p.name] = p.tensor->grad().clone();
  return out;
}

void check_same(const Step& keep, const Step& recompute) {
  CHECK(recompute.loss == keep.loss);
  REQUIRE(recompute.grads.size() == keep.grads.size());
  for (const auto& [name, g] : keep.grads) {
    CAPTURE(name);
    CHECK(at::equal(g, recompute.grads.at(name)));
    CHECK(g.abs().sum().item<double>() > 0.0);
  }
  CHECK(at::equal(keep.next_random, recompute.next_random));
}

}  // namespace

TEST_CASE("gpt and llama: recomputed blocks give the same loss and gradients, dropout included") {
  for (const std::string component : {"gpt", "llama"}) {
    CAPTURE(component);
    const toml::table base{{"vocab_size", 32}, {"n_layer", 3}, {"n_head", 2},   {"n_embd", 16},
                           {"seq_len", 8},     {"dropout", 0.2}};
    const Step keep = train_step(component, base);
    check_same(keep, train_step(component, merged(base, toml::table{{"activation_checkpointing", "full"}})));
    check_same(keep, train_step(component, merged(base, toml::table{{"activation_checkpointing", "every_n"},
                                                                     {"checkpoint_every", 2}})));
  }
}

TEST_CASE("with the embeddings frozen (LoRA, freeze), recomputed blocks still give every trained parameter its gradient") {
  // The first block's input then carries no gradient: without care, "full" failed (the loss had
  // no gradient) and "every_n" left block 0's parameters without one.
  for (const auto& [component, embeddings] : {std::pair<std::string, std::string>{"gpt", "transformer.w"},
                                              {"llama", "embed_tokens"}}) {
    CAPTURE(component);
    toml::table options{{"vocab_size", 32}, {"n_layer", 3}, {"n_head", 2}, {"n_embd", 16}, {"seq_len", 8}, {"dropout", 0.2}};
    if (component == "llama") options.insert("tie_embeddings", false);  // its output layer trains; gpt's is wte
    const Step keep = train_step(component, options, embeddings);
    CHECK(keep.grads.size() > 3);
    check_same(keep, train_step(component, merged(options, toml::table{{"activation_checkpointing", "full"}}), embeddings));
    check_same(keep, train_step(component,
                                merged(options, toml::table{{"activation_checkpointing", "every_n"}, {"checkpoint_every", 2}}),
                                embeddings));
  }
}

TEST_CASE("activation_checkpointing rejects an unknown mode and checkpoint_every below 1") {
  const toml::table base{{"vocab_size", 32}, {"n_layer", 2}, {"n_head", 2}, {"n_embd", 16}, {"seq_len", 8}};
  const std::string mode =
      failure_message([&] { make_model("gpt", merged(base, toml::table{{"activation_checkpointing", "some"}})); });
  CHECK(mode.find("activation_checkpointing = \"some\"") != std::string::npos);
  const std::string every = failure_message([&] {
    make_model("llama", merged(base, toml::table{{"activation_checkpointing", "every_n"}, {"checkpoint_every", 0}}));
  });
  CHECK(every.find("checkpoint_every must be at least 1") != std::string::npos);
}
