// expert_placement.hpp: experts placed on their rank ([distributed] expert_parallel = E > 1,
// LOOM_PARAM_FLAG_EXPERT, ABI 1.13). Each rank of an expert group registers only the experts it
// computes, in the flat buffers' expert groups (train/flat_params.hpp), whose gradients the
// expert replicas sum (train/grad_sync.hpp). This puts the group's experts back together where
// a whole model is needed, in the layout one process has:
//   - checkpoints: model/<expert> for every expert, and the expert groups' elementwise optimizer
//     state in one process's flat layout, so a checkpoint is the same at every E and resumes
//     on any (cut() takes a rank's experts back out);
//   - [export] folders, and the frozen weights' checksum (LoRA), as one process computes it.
//
// One process's order of the experts: each rank registers its experts as runs (a layer's
// experts one after another, in expert order); run k of the whole model is run k of rank 0,
// then of rank 1, ... (ranks own consecutive experts). Every rank's experts have the same
// shapes at the same places, so gathering is an all-gather of equal chunks.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "abi/checkpoint_backend.hpp"
#include "checkpoint/snapshot.hpp"
#include "dist/communicator.hpp"
#include "train/pipeline.hpp"

namespace loom {

// The experts (LOOM_PARAM_FLAG_EXPERT) the other ranks of the group registered, by name; every
// rank of the group calls it, before the flat buffers exist ([model] init_from reads them).
std::set<std::string> experts_held_elsewhere(ModelInstance& model, Communicator& group);

class ExpertPlacement {
 public:
  // Every rank of the expert group calls it in step, once the flat buffers exist: the ranks
  // exchange the names and shapes of their experts. Throws a runtime Failure when they do not
  // line up (a model that places experts otherwise than LOOM_PARAM_FLAG_EXPERT says).
  ExpertPlacement(Pipeline& p, Communicator& group);

  // Every rank of the group calls it on its own unsharded capture; then the group's rank 0
  // holds model/<expert> of every expert and the expert groups' optimizer state whole.
  void gather_whole(Snapshot& s);
  // The same on a sharded part (checkpoint/sharded_checkpoint.hpp): the expert groups, whole,
  // go into the part of world rank 0 (first_part), the other parts hold none of them.
  void gather_part(Snapshot& part, bool first_part);
  // A whole checkpoint as this rank's experts (no collective). Throws a runtime Failure naming
  // origin when its expert state does not fit this model.
  LoadedCheckpoint cut(LoadedCheckpoint whole, const std::string& origin) const;
  // "its 8 of 16 experts' weights (49152 of 98304 elements)", for the log.
  std::string describe() const;
  // Every expert's weights by name; every rank of the group calls it.
  std::map<std::string, at::Tensor> gather_params();
  // The frozen weights' checksum over every expert, as one process computes it; every rank of
  // the group calls it once before training, and the model gets it.
  void use_whole_frozen_checksum();

 private:
  struct Expert {
    std::string name;
    std::vector<int64_t> shape;
    int owner = 0;     // expert rank
    size_t local = 0;  // its index among its owner's experts (the same shape at every rank)
  };
  struct GroupLayout {                      // one expert group of the flat buffers
    size_t group = 0;                       // its index in FlatParams
    int64_t local_numel = 0, whole_numel = 0;
    std::vector<int64_t> local_offset;      // per local index (-1: not in this group)
    std::vector<int64_t> whole_offset;      // per whole expert (-1: not in this group)
  };
  at::Tensor gather_flat(const at::Tensor& local, const GroupLayout& g);
  at::Tensor cut_flat(const at::Tensor& whole, const GroupLayout& g, const std::string& what,
                      const std::string& origin) const;
  // Every expert's tensor, in whole_ order, from this rank's (in local order).
  std::vector<at::Tensor> gather_tensors(const std::vector<at::Tensor>& mine);
  const GroupLayout* layout_of_state(const std::string& state) const;

  Pipeline& p_;
  Communicator& group_;
  std::vector<std::string> local_;    // this rank's experts, in registration order
  std::map<std::string, size_t> local_index_;  // each one's place in local_
  std::vector<size_t> run_of_local_;  // the run each belongs to
  std::vector<bool> in_buffers_;      // trains (in an expert group), or is frozen
  bool frozen_experts_ = false;
  std::vector<Expert> whole_;         // every expert, in one process's registration order
  std::vector<GroupLayout> groups_;
};

}  // namespace loom
