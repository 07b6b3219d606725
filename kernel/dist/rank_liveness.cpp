#include "dist/rank_liveness.hpp"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "dist/local_address.hpp"
#include "dist/within_deadline.hpp"

namespace loom {

struct RankLiveness::State {
  DistEnv env;
  c10::intrusive_ptr<c10d::Store> store;
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  std::promise<void> beating_ended;
};

namespace {

std::string counter_key(int rank) { return "loom/alive/" + std::to_string(rank); }
std::string address_key(int rank) { return "loom/where/" + std::to_string(rank); }
std::string failed_key(int rank) { return "loom/failed/" + std::to_string(rank); }

// "2, 3"
std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

void beat_until_stopped(const std::shared_ptr<RankLiveness::State>& state) {
  std::unique_lock<std::mutex> lock(state->mutex);
  while (!state->wake.wait_for(lock, RankLiveness::kBeat, [&] { return state->stop; })) {
    lock.unlock();
    try {
      state->store->add(counter_key(state->env.rank), 1);
    } catch (const std::exception&) {
      break;  // the store is gone (the run ends, or node 0 was lost): who_is_lost says which
    }
    lock.lock();
  }
  state->beating_ended.set_value();
}

}  // namespace

RankLiveness::RankLiveness(const DistEnv& env, const std::string& my_address, std::chrono::milliseconds timeout)
    : state_(std::make_shared<State>()) {
  state_->env = env;
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(env.master_port);
  options.isServer = false;
  options.numWorkers = static_cast<size_t>(env.world_size);
  options.waitWorkers = false;
  options.timeout = std::min(timeout, std::chrono::milliseconds(kStoreDeadline));
  state_->store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
  if (!attempt_prefix(env).empty())
    state_->store = c10::make_intrusive<c10d::PrefixStore>(attempt_prefix(env), state_->store);
  const std::string where = describe_node(my_address);
  state_->store->set(address_key(env.rank), std::vector<uint8_t>(where.begin(), where.end()));
  state_->store->add(counter_key(env.rank), 1);
  beating_ = std::thread([state = state_] { beat_until_stopped(state); });
}

RankLiveness::~RankLiveness() {
  std::future<void> ended = state_->beating_ended.get_future();
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stop = true;
  }
  state_->wake.notify_all();
  if (ended.wait_for(kStoreDeadline) == std::future_status::ready)
    beating_.join();
  else
    beating_.detach();  // stuck in a request to a store that is cut off; it holds its own state
}

std::string RankLiveness::who_is_lost() {
  const std::shared_ptr<State> state = state_;
  const DistEnv& env = state->env;
  const auto counters = [state] {
    std::vector<int64_t> out;
    for (int r = 0; r < state->env.world_size; ++r) out.push_back(state->store->add(counter_key(r), 0));
    return out;
  };
  const auto before = within<std::vector<int64_t>>(kStoreDeadline, [state, counters] {
    state->store->add(failed_key(state->env.rank), 1);
    return counters();
  });
  if (before) std::this_thread::sleep_for(kWatch);
  const auto after = before ? within<std::vector<int64_t>>(kStoreDeadline, counters) : std::nullopt;
  const auto lost = after ? within<std::map<std::string, std::vector<int>>>(kStoreDeadline, [state, before, after] {
    std::map<std::string, std::vector<int>> out;  // by where they ran
    for (int r = 0; r < state->env.world_size; ++r) {
      const size_t i = static_cast<size_t>(r);
      if ((*after)[i] > (*before)[i] || state->store->check({failed_key(r)})) continue;
      const std::vector<uint8_t> where = state->store->get(address_key(r));
      out[std::string(where.begin(), where.end())].push_back(r);
    }
    return out;
  })
                          : std::nullopt;
  if (!lost)
    return "the run's store at " + env.master_addr + ":" + std::to_string(env.master_port) +
           " no longer answers: node 0, which serves it (its launcher, torchrun's agent or rank 0), is lost or cut off";
  std::string out;
  for (const auto& [where, ranks] : *lost)
    out += (out.empty() ? "rank(s) " : "; rank(s) ") + rank_list(ranks) + " on " + where;
  if (out.empty()) return out;
  out += " stopped responding: their node died or was cut off, or they were killed";
  within<bool>(kStoreDeadline, [state, out] { return !state->store->compareSet(kLostKey, "", out).empty(); });
  return out;
}

std::string RankLiveness::recorded_loss(const c10::intrusive_ptr<c10d::Store>& store, const DistEnv& env) {
  const auto ranks_store = c10::make_intrusive<c10d::PrefixStore>(attempt_prefix(env), store);
  const auto found = within<std::string>(kStoreDeadline, [ranks_store] {
    if (!ranks_store->check({kLostKey})) return std::string();
    const std::vector<uint8_t> value = ranks_store->get(kLostKey);
    return std::string(value.begin(), value.end());
  });
  return found.value_or(std::string());
}

}  // namespace loom
