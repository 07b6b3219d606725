#include "dist/elastic_rendezvous.hpp"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "base/failure.hpp"
#include "dist/within_deadline.hpp"

namespace loom {
namespace {

std::string text(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }

// "failure\n<reason>" or "admit\n<reason>": one value, so that every launcher reads one cause.
std::string encode(const RoundEnd& end) { return std::string(end.admit ? "admit" : "failure") + "\n" + end.reason; }

// A count another launcher wrote; anything else in the store is refused by key, never guessed.
int64_t count_at(const std::string& key, const std::string& value) {
  size_t used = 0;
  int64_t out = -1;
  try {
    out = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || out < 0)
    throw runtime_failure("launch: the rendezvous store holds \"" + value.substr(0, 40) + "\" at " + key +
                          ", not a count a Loom launcher writes: is another program using --master-port?");
  return out;
}

RoundEnd decode(const std::string& value) {
  const size_t cut = value.find('\n');
  return RoundEnd{value.substr(0, cut) == "admit", cut == std::string::npos ? value : value.substr(cut + 1)};
}

// One store request within the deadline, or the line that the store's host is gone.
template <class Result, class Call>
Result ask(const c10::intrusive_ptr<c10d::Store>& store, const std::string& what, Call call) {
  auto answer = within<Result>(ElasticRendezvous::kStoreDeadline, [store, call] { return call(*store); });
  if (!answer)
    throw runtime_failure("launch: the rendezvous store no longer answers (" + what +
                          "): the node serving it, at --master-addr, is lost or cut off, and the job cannot go on "
                          "without it");
  return *answer;
}

}  // namespace

ElasticRendezvous::ElasticRendezvous(c10::intrusive_ptr<c10d::Store> store, RendezvousSettings settings)
    : store_(std::move(store)), settings_(std::move(settings)) {}

std::string ElasticRendezvous::key(int round, const std::string& name) const {
  return "loom/rdzv/" + settings_.id + "/round/" + std::to_string(round) + "/" + name;
}

RoundMembers ElasticRendezvous::join(int round) {
  using clock = std::chrono::steady_clock;
  const auto give_up = clock::now() + settings_.join_timeout;
  for (int r = round;; ++r) {
    const std::string joined = key(r, "joined"), closed = key(r, "closed");
    const int64_t place = ask<int64_t>(store_, "joining", [joined](c10d::Store& s) { return s.add(joined, 1); });
    const std::string mine = std::to_string(settings_.nproc_per_node) + " " + settings_.where;
    const std::string node_key = key(r, "node/" + std::to_string(place));
    ask<bool>(store_, "joining", [node_key, mine](c10d::Store& s) { return s.set(node_key, mine), true; });
    int64_t last_count = -1;
    clock::time_point last_arrival = clock::now();
    std::optional<int64_t> nnodes;
    while (!nnodes) {
      // Closed by someone (the count every launcher of the round goes by), or closable now.
      const std::string at_close = ask<std::string>(store_, "waiting for the round", [closed](c10d::Store& s) {
        return s.check({closed}) ? text(s.get(closed)) : std::string();
      });
      if (!at_close.empty()) {
        nnodes = count_at(closed, at_close);
        break;
      }
      const int64_t count = ask<int64_t>(store_, "waiting for the round", [joined](c10d::Store& s) { return s.add(joined, 0); });
      if (count != last_count) {
        last_count = count;
        last_arrival = clock::now();  // a new arrival opens the last call again
      }
      const bool full = count >= settings_.max_nodes;
      const bool enough = count >= settings_.min_nodes && clock::now() - last_arrival >= settings_.last_call;
      if (full || enough) {
        const std::string proposal = std::to_string(std::min<int64_t>(count, settings_.max_nodes));
        nnodes = count_at(closed, ask<std::string>(store_, "closing the round", [closed, proposal](c10d::Store& s) {
          return s.compareSet(closed, std::string(), proposal);
        }));
        break;
      }
      if (clock::now() > give_up)
        throw runtime_failure("launch: rendezvous '" + settings_.id + "' round " + std::to_string(r) + ": " +
                              std::to_string(count) + " of at least " + std::to_string(settings_.min_nodes) +
                              " nodes arrived within --rdzv-timeout " + std::to_string(settings_.join_timeout.count()) +
                              " s; start the missing nodes' launchers or lower --nnodes");
      std::this_thread::sleep_for(kPoll);
    }
    if (place > *nnodes) {
      std::fprintf(stderr, "launch: round %d closed with %lld nodes before this one arrived; waiting for the next\n", r,
                   static_cast<long long>(*nnodes));
      continue;  // the running nodes see this one waiting in round r + 1 and make room if they can
    }
    RoundMembers members;
    members.round = r;
    members.node_rank = static_cast<int>(place - 1);
    members.nnodes = static_cast<int>(*nnodes);
    for (int64_t n = 1; n <= *nnodes; ++n) {
      const std::string other = key(r, "node/" + std::to_string(n));
      // Its place is taken before its description is written: wait for the description.
      const std::string value = ask<std::string>(store_, "reading the round's nodes", [other](c10d::Store& s) {
        return text(s.get(other));
      });
      const size_t space = value.find(' ');
      const int64_t nproc = count_at(other, value.substr(0, space));
      const std::string where = space == std::string::npos ? "?" : value.substr(space + 1);
      if (nproc != settings_.nproc_per_node)
        throw usage_failure("launch: node " + where + " starts " + std::to_string(nproc) + " ranks and this one " +
                            std::to_string(settings_.nproc_per_node) + ": give every node the same --nproc-per-node");
      members.nodes.push_back(where);
    }
    return members;
  }
}

RoundEnd ElasticRendezvous::end_round(int round, const RoundEnd& why) {
  const std::string ended_key = key(round, "ended"), value = encode(why);
  return decode(ask<std::string>(store_, "ending the round", [ended_key, value](c10d::Store& s) {
    return s.compareSet(ended_key, std::string(), value);
  }));
}

std::optional<RoundEnd> ElasticRendezvous::ended(int round, int nnodes) {
  if (std::optional<RoundEnd> recorded = recorded_end(round)) return recorded;
  if (nnodes >= settings_.max_nodes) return std::nullopt;  // the job cannot grow
  const std::string waiting = key(round + 1, "joined");
  const int64_t waiting_nodes =
      ask<int64_t>(store_, "watching the round", [waiting](c10d::Store& s) { return s.add(waiting, 0); });
  if (waiting_nodes > 0)
    return end_round(round, RoundEnd{true, std::to_string(waiting_nodes) + " node(s) waiting to join (" +
                                               std::to_string(nnodes) + " running, at most " +
                                               std::to_string(settings_.max_nodes) + ")"});
  return std::nullopt;
}

std::optional<RoundEnd> ElasticRendezvous::recorded_end(int round) {
  const std::string ended_key = key(round, "ended");
  const std::string recorded = ask<std::string>(store_, "watching the round", [ended_key](c10d::Store& s) {
    return s.check({ended_key}) ? text(s.get(ended_key)) : std::string();
  });
  if (recorded.empty()) return std::nullopt;
  return decode(recorded);
}

void ElasticRendezvous::finish(int round, int nnodes, bool serving) {
  const std::string finished = key(round, "finished"), ended_key = key(round, "ended");
  int64_t count = ask<int64_t>(store_, "finishing", [finished](c10d::Store& s) { return s.add(finished, 1); });
  if (!serving) return;
  const auto give_up = std::chrono::steady_clock::now() + settings_.join_timeout;
  bool said = false;
  while (count < nnodes && std::chrono::steady_clock::now() < give_up) {
    if (!said) std::fprintf(stderr, "launch: waiting for the other nodes' ranks to end (this node serves the store)\n");
    said = true;
    std::this_thread::sleep_for(kPoll);
    const auto [done, ended] = ask<std::pair<int64_t, bool>>(store_, "finishing", [finished, ended_key](c10d::Store& s) {
      return std::make_pair(s.add(finished, 0), s.check({ended_key}));
    });
    if (ended) return;  // another node failed after this one's ranks ended well: they go on without it
    count = done;
  }
}

}  // namespace loom
