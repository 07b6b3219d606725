// parameter_shards.hpp: [distributed] shard = "parameters" (ZeRO-3, FSDP's FULL_SHARD). The
// model declares units (a layer each: loom_param_view.unit) and calls the host around each
// unit's forward (loom/model.h unit_boundary). Each rank keeps, of every unit, only the part
// inside its own slice of the flat buffer (FlatParams); the rest is gathered from the ranks
// that own it (one broadcast per owner's piece) just before the unit's forward and again
// before its backward, with the next unit's gather started meanwhile, and released after (its
// pages returned to the OS; on CUDA its memory unmapped once the GPU is done with it,
// train/mapped_cuda_memory.hpp). Weights outside every unit (embeddings, final norm: the "root")
// are gathered once at the start of a step (or an evaluation), kept through its backward, and
// released after the optimizer step.
//
// The flat layout is the one every mode uses, so checkpoints and optimizer state are the same
// as with "gradients"; gradients are reduced to their owners as there.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "abi/compute_components.hpp"
#include "abi/unit_boundary.hpp"
#include "dist/communicator.hpp"
#include "train/flat_params.hpp"

namespace loom {

class ParameterShards final : public UnitBoundaries {
 public:
  // Throws a usage Failure naming model when it declares no units or a unit's parameters are
  // not registered one after another. Installs itself as the process's unit boundaries and
  // releases every unit's weights outside this rank's slice.
  ParameterShards(const std::vector<ModelParam>& params, FlatParams& flat, Communicator& comm,
                  const std::string& model);
  ~ParameterShards() override;
  ParameterShards(const ParameterShards&) = delete;
  ParameterShards& operator=(const ParameterShards&) = delete;

  at::Tensor enter(int64_t unit, const at::Tensor& x) override;
  at::Tensor exit(int64_t unit, const at::Tensor& y) override;

  // Before each micro-batch's backward: each unit is released again once autograd has added
  // the gradients of all its parameters. The first call also checks that the forward entered
  // every unit the model declared.
  void begin_backward();
  // Before a step's first forward, or an evaluation: the weights outside every unit.
  void gather_root();
  // After the optimizer step (or an evaluation): every unit and the root are released and
  // gathered afresh, with the updated slices, when they are needed next.
  void after_step() { release_all(); }
  // Everything outside this rank's slice is given back (start, after a restore).
  void release_all();
  // Before the whole weights are written (a restore): on CUDA the memory outside this rank's
  // slices is mapped again (train/mapped_cuda_memory.hpp); on the CPU pages come back when
  // written, and this does nothing.
  void acquire_all();

  int64_t unit_count() const { return static_cast<int64_t>(units_.size()); }
  // Bytes of weights this rank keeps between steps: its slices.
  int64_t resident_param_bytes() const;

 private:
  struct Piece {
    at::Tensor range;  // a view of a flat parameter buffer
    int owner;         // the rank whose slice holds it
  };
  enum class State { released, gathering, gathered };
  struct Unit {
    std::vector<Piece> pieces;        // its weights, cut at slice edges
    std::vector<at::Tensor> unowned;  // the parts outside this rank's slice
    std::vector<uint64_t> tickets;    // broadcasts in flight while gathering
    State state = State::released;
    size_t params = 0, missing = 0;   // parameters; those without this backward's gradient yet
    bool entered = false;             // the forward called enter() for it
  };

  Unit& unit_at(int64_t unit, const char* phase);
  void start_gather(Unit& u);
  void ensure_gathered(Unit& u);
  void release(Unit& u);
  void prefetch(int64_t unit);
  std::vector<Unit*> all_units();  // the root, then units 0..

  FlatParams& flat_;
  Communicator& comm_;
  std::string model_;
  std::vector<Unit> units_;
  Unit root_;  // the weights outside every unit, cut at slice edges
  std::vector<std::shared_ptr<const void>> accumulators_;  // keep the hooks alive (on_gradient_accumulated)
  bool checked_entered_ = false;
};

}  // namespace loom
