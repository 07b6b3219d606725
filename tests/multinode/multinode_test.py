#!/usr/bin/env python3
"""Multi-node runs on one machine, each node a network namespace (issue 55).

Every node is a Linux network namespace with its own address on a bridge that lives in a
namespace of its own (the "switch"), so nothing outside the namespaces this script creates is
touched or reached. Each node starts its ranks with `host launch --nnodes N --node-rank R`, as
a cluster scheduler would, and the nodes share the file system (a shared run folder, as on a
cluster's NFS). Faults are made with the switch: a node's port set down is its cable pulled.

Cases (each prints one line, PASS, FAIL or SKIP with the reason):
  clean          2 nodes x 2 ranks train 20 steps with one process's losses (within 1e-5)
  node_killed    node 1's launcher SIGKILLed mid-step: node 0 stops, names the lost ranks and node
  node_cut       node 1's cable pulled mid-step: both sides stop within timeout_s plus the bound
  master_killed  node 0's launcher (which serves the store) SIGKILLed: node 1 stops, naming it
  cut_at_start   node 1 cut off before the rendezvous: node 0 names the ranks that never joined
  killed_saving  node 1 killed while a checkpoint is being written: no checkpoint is left
                 marked valid that is not whole, and the run resumes from the newest valid one
  elastic_3_to_2 torchrun's elastic agent on 3 nodes (--nnodes 2:3), node 2 cut off mid-run: the
                 other two restart their ranks at world 4, which resume from the newest
                 checkpoint (saved at world 6) to a 4-rank run's final weights from it (1e-5)
  launch_elastic_3_to_2  the same with `host launch --nnodes 2:3 --max-restarts 3` on each node
  slow_rate      a link limited to 1 Mbit/s each way (tc tbf): the same losses as one process, and
                 the step time against the full-speed bridge
  slow_link      50 ms of delay and 5% loss on a link (tc netem): the same losses as the clean run
After every fault: no process of the run is left, the run folder's lock is free, and every
checkpoint folder `host checkpoint inspect` calls valid loads.

Needs root (namespaces) and iproute2; exits 77 (ctest's skip) with the reason otherwise.

usage: multinode_test.py --host build/bin/host --tmp DIR [--torchrun .venv/bin/torchrun] [--only CASE,...]
"""

import argparse
import fcntl
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time

SKIP = 77
TIMEOUT_S = 10  # [distributed] timeout_s of the runs
# How long after timeout_s every surviving process must have ended (README "Many machines").
STOP_BOUND_S = 30
MASTER_PORT = 29400  # inside the namespaces: no other process listens there


def ip(*args, check=True):
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


class Cluster:
    """A switch namespace with a bridge, and one namespace per node plugged into it."""

    def __init__(self, nodes):
        tag = f"lmn{os.getpid() % 100000}"
        self.subnet = f"10.213.{os.getpid() % 250}"
        self.switch = f"{tag}s"
        self.nodes = [f"{tag}n{i}" for i in range(nodes)]

    def __enter__(self):
        try:
            ip("netns", "add", self.switch)
            ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            ip("-n", self.switch, "link", "set", "br0", "up")
            for i, node in enumerate(self.nodes):
                ip("netns", "add", node)
                ip("-n", node, "link", "set", "lo", "up")
                ip("-n", node, "link", "add", "eth0", "type", "veth", "peer", "name", f"port{i}", "netns", self.switch)
                ip("-n", self.switch, "link", "set", f"port{i}", "master", "br0", "up")
                ip("-n", node, "addr", "add", f"{self.address(i)}/24", "dev", "eth0")
                ip("-n", node, "link", "set", "eth0", "up")
        except Exception:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for ns in [*self.nodes, self.switch]:
            ip("netns", "del", ns, check=False)  # takes its interfaces along

    def address(self, node):
        return f"{self.subnet}.{node + 1}"

    def cut(self, node):
        ip("-n", self.switch, "link", "set", f"port{node}", "down")

    def start(self, node, argv, log):
        """A process in the node's namespace (ip netns exec execs it: its pid is the command's)."""
        out = open(log, "w")
        return subprocess.Popen(["ip", "netns", "exec", self.nodes[node], *argv], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def write_manifest(folder, steps, every=10):
    path = os.path.join(folder, "m.toml")
    with open(path, "w") as f:
        f.write(f'[run]\ndir = "{folder}"\nsteps = {steps}\nlog_every = 1\nthreads = 1\npeak_flops = 1e9\n'
                '[model]\nuse = "mlp_lm"\nn_embd = 16\ncontext = 2\nhidden = 32\n'
                '[data]\nuse = "synthetic"\nseq_len = 16\nbatch_size = 2\n'
                '[optimizer]\nuse = "adamw"\nlr = 0.01\n'
                '[[trackers]]\nuse = "jsonl"\n'
                f'[checkpoint]\nevery = {every}\nkeep = 50\n'
                f'[distributed]\ntimeout_s = {TIMEOUT_S}\n')
    return path


def processes_with_argument(argument):
    """The pids whose command line has `argument` as one of its words."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                words = f.read().split(b"\0")
        except OSError:  # not a process, or one that just ended
            continue
        if argument.encode() in words:
            pids.append(int(entry))
    return pids


def losses(run):
    path = os.path.join(run, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line)["loss"] for line in f if line.strip()]


class Case:
    def __init__(self, args, cluster, name):
        self.host, self.torchrun, self.cluster, self.name = args.host, args.torchrun, cluster, name
        self.folder = os.path.join(args.tmp, name)
        shutil.rmtree(self.folder, ignore_errors=True)
        os.makedirs(self.folder)
        self.failures = []
        self.run_name = "mn_" + name  # unique: check_nothing_left looks for the run's processes by it

    def check(self, ok, what):
        if not ok:
            self.failures.append(what)
        return ok

    def launch(self, node, manifest, run_name, extra=(), env=None):
        argv = ["env", *(env or []), self.host, "launch", "--nproc-per-node", "2", "--nnodes", str(len(self.cluster.nodes)),
                "--node-rank", str(node), "--master-addr", self.cluster.address(0), "--master-port", str(MASTER_PORT),
                "--", "run", manifest, "--set", f"run.name={run_name}", *extra]
        return self.cluster.start(node, argv, os.path.join(self.folder, f"{run_name}-node{node}.log"))

    def log(self, run_name, node):
        with open(os.path.join(self.folder, f"{run_name}-node{node}.log")) as f:
            return f.read()

    def wait_for_step(self, run, step, procs, limit=120):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if len(losses(run)) >= step:
                return True
            if any(p.poll() is not None for p in procs):
                return False
            time.sleep(0.05)
        return False

    def wait_all(self, procs, limit):
        """Each process's exit code, or None for one still running after limit seconds (then killed)."""
        deadline = time.monotonic() + limit
        codes = []
        for p in procs:
            try:
                codes.append(p.wait(timeout=max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                codes.append(None)
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        return codes

    def check_nothing_left(self, run):
        """No process of the run alive; the lock free; every valid checkpoint loads."""
        time.sleep(0.5)
        left = processes_with_argument(f"run.name={os.path.basename(run)}")
        self.check(not left, f"processes left: {left}")
        lock = os.path.join(run, "run.lock")
        if os.path.exists(lock):
            with open(lock) as f:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    fcntl.flock(f, fcntl.LOCK_UN)
                except OSError:
                    self.check(False, "run.lock is still held")
        checkpoints = os.path.join(run, "checkpoints")
        valid = []
        for entry in sorted(os.listdir(checkpoints)) if os.path.isdir(checkpoints) else []:
            inspect = subprocess.run([self.host, "checkpoint", "inspect", os.path.join(checkpoints, entry), "--json"],
                                     capture_output=True, text=True)
            if re.fullmatch(r"step-\d+", entry):
                self.check(inspect.returncode == 0, f"checkpoint {entry} is named as a valid one but does not load: "
                           f"{inspect.stderr.strip()}")
                valid.append(entry)
            else:
                self.check(inspect.returncode != 0, f"{entry} is not named step-N but loads as a checkpoint")
        return valid


def fault_case(case, fault, expect_node0, expect_node1, both_stop=True):
    """A run killed by fault(procs) after step 3; the survivors stop in time, saying expect_*."""
    m = write_manifest(case.folder, 1000000)
    name = case.run_name
    run = os.path.join(case.folder, name)
    procs = [case.launch(0, m, name), case.launch(1, m, name)]
    if not case.check(case.wait_for_step(run, 3, procs), "the run did not reach step 3"):
        case.wait_all(procs, 1)
        return
    started = time.monotonic()
    fault(procs)
    codes = case.wait_all(procs, TIMEOUT_S + STOP_BOUND_S)
    seconds = time.monotonic() - started
    for node, code in enumerate(codes):
        case.check(code is not None, f"node {node}'s launcher still ran {TIMEOUT_S + STOP_BOUND_S} s after the fault")
        if code == -signal.SIGKILL:
            continue  # the fault's own victim
        case.check(code not in (None, 0), f"node {node}'s launcher exited 0 after the fault")
        expect = (expect_node0, expect_node1)[node]
        if expect:
            text = case.log(name, node)
            case.check(re.search(expect, text) is not None, f"node {node}'s log lacks /{expect}/:\n{text[-3000:]}")
    case.check_nothing_left(run)
    return seconds


def two_nodes_against_one(case, run_name):
    """20 steps on 2 nodes x 2 ranks against one process: the worst relative loss difference and
    the two-node run's median step time (ms), or None after a failure."""
    m = write_manifest(case.folder, 20)
    if not os.path.exists(os.path.join(case.folder, "one")):
        one = subprocess.run([case.host, "run", m, "--set", "run.name=one", "--set", "data.batch_size=8"],
                             capture_output=True, text=True)
        if not case.check(one.returncode == 0, f"one process failed: {one.stderr[-2000:]}"):
            return None
    procs = [case.launch(0, m, run_name), case.launch(1, m, run_name)]
    codes = case.wait_all(procs, 300)
    for node, code in enumerate(codes):
        case.check(code == 0, f"node {node} exited {code}:\n{case.log(run_name, node)[-3000:]}")
    a, b = losses(os.path.join(case.folder, "one")), losses(os.path.join(case.folder, run_name))
    if not case.check(len(a) == 20 and len(b) == 20, f"{len(a)} and {len(b)} losses logged, not 20"):
        return None
    worst = max((abs(x - y) / max(abs(x), 1e-12) for x, y in zip(a, b)), default=0)
    case.check(worst <= 1e-5, f"losses differ by {worst:.3g} (relative) from one process's")
    with open(os.path.join(case.folder, run_name, "metrics.jsonl")) as f:
        times = sorted(json.loads(line)["step_time_ms"] for line in f if "step_time_ms" in line)
    return worst, times[len(times) // 2]


def case_clean(case):
    result = two_nodes_against_one(case, "two")
    return result and f"losses within {result[0]:.2g} of one process, median step {result[1]:.1f} ms"


def case_slow_rate(case):
    """Node 1's link limited to 1 Mbit/s each way (tc tbf): the same losses as one process, and
    what the slow link costs per step against the same run on the full-speed bridge."""
    clean = two_nodes_against_one(case, "fast")
    if clean is None:
        return None
    limits = [(case.cluster.nodes[1], "eth0"), (case.cluster.switch, "port1")]  # both directions
    for ns, dev in limits:
        added = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate",
                                "1mbit", "burst", "32kb", "latency", "400ms"], capture_output=True, text=True)
        if added.returncode != 0:
            return "SKIP: tc tbf is not available here (" + (added.stderr.strip() or "no tc") + ")"
    slow = two_nodes_against_one(case, "slow")
    return slow and (f"losses within {slow[0]:.2g} of one process; median step {slow[1]:.1f} ms at 1 Mbit/s against "
                     f"{clean[1]:.1f} ms on the bridge ({slow[1] / clean[1]:.1f}x)")


LOST_NODE1 = r"rank\(s\) 2, 3 on \S+ \(10\.213\.\d+\.2\) stopped responding"


def case_node_killed(case):
    seconds = fault_case(case, lambda procs: os.kill(procs[1].pid, signal.SIGKILL), LOST_NODE1, None)
    return seconds is not None and f"node 0 stopped {seconds:.1f} s after the kill"


def case_node_cut(case):
    seconds = fault_case(case, lambda procs: case.cluster.cut(1), LOST_NODE1, r"store|master|rank\(s\) 0, 1")
    return seconds is not None and f"both nodes stopped {seconds:.1f} s after the cut"


def case_master_killed(case):
    seconds = fault_case(case, lambda procs: os.kill(procs[0].pid, signal.SIGKILL), None, r"store|master")
    return seconds is not None and f"node 1 stopped {seconds:.1f} s after the kill"


def case_cut_at_start(case):
    m = write_manifest(case.folder, 5)
    case.cluster.cut(1)
    started = time.monotonic()
    name = case.run_name
    procs = [case.launch(0, m, name), case.launch(1, m, name)]
    codes = case.wait_all(procs, TIMEOUT_S + STOP_BOUND_S)
    seconds = time.monotonic() - started
    case.check(all(c not in (None, 0) for c in codes), f"exit codes {codes}, want both non-zero and ended")
    case.check(re.search(r"rank\(s\) 2, 3 of 4 did not join", case.log(name, 0)) is not None,
               f"node 0's log does not name ranks 2, 3:\n{case.log(name, 0)[-3000:]}")
    case.check(re.search(r"could not meet the others", case.log(name, 1)) is not None,
               f"node 1's log does not say it could not meet the others:\n{case.log(name, 1)[-3000:]}")
    case.check_nothing_left(os.path.join(case.folder, name))
    return f"both nodes stopped {seconds:.1f} s after starting"


def case_killed_saving(case):
    """A sharded save (every rank writes its part, rank 0 commits once all reported) with node 1
    killed inside it: the save in progress never becomes a step-N folder."""
    m = write_manifest(case.folder, 1000000, every=2)
    name = case.run_name
    run = os.path.join(case.folder, name)
    sharded = ["--set", "distributed.shard=optimizer"]
    slow = ["LOOM_TEST_SAVE_DELAY_MS=1500"]  # each rank's part takes 1.5 s: the kill lands inside one
    procs = [case.launch(node, m, name, extra=sharded, env=slow) for node in (0, 1)]
    if not case.check(case.wait_for_step(run, 5, procs), "the run did not reach step 5"):
        case.wait_all(procs, 1)
        return
    checkpoints = os.path.join(run, "checkpoints")  # step-2 and step-4 whole by now
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(e.endswith(".tmp") for e in os.listdir(checkpoints)):
        time.sleep(0.02)
    time.sleep(0.5)
    saving = sorted(e for e in os.listdir(checkpoints) if e.endswith(".tmp"))
    os.kill(procs[1].pid, signal.SIGKILL)
    codes = case.wait_all(procs, TIMEOUT_S + STOP_BOUND_S)
    case.check(codes[0] not in (None, 0), f"node 0 exited {codes[0]} after the kill")
    valid = case.check_nothing_left(run)
    if not case.check(len(saving) == 1, f"no single save in progress when node 1 was killed: {saving}"):
        return
    interrupted = int(saving[0].split("-")[1].split(".")[0])
    case.check(f"step-{interrupted}" not in valid, f"step-{interrupted}, being written when node 1 died, is a "
               "step-N folder")
    newest = max((int(v.split("-")[1]) for v in valid), default=0)
    # The same command again on both nodes resumes from the newest valid checkpoint, and its save
    # at the interrupted step replaces the debris.
    procs = [case.launch(node, m, name, extra=[*sharded, "--set", f"run.steps={interrupted}"]) for node in (0, 1)]
    codes = case.wait_all(procs, 120)
    text = case.log(name, 0)
    case.check(codes == [0, 0], f"the resumed run exited {codes}:\n{text[-3000:]}")
    if newest:
        case.check(f"resumed from {checkpoints}/step-{newest} at step {newest}" in text,
                   f"the resumed run does not resume from step-{newest}:\n{text[-3000:]}")
    left = sorted(e for e in os.listdir(checkpoints) if e.endswith(".tmp"))
    case.check(not left and f"step-{interrupted}" in os.listdir(checkpoints),
               f"after the resumed run's save at step {interrupted}: {sorted(os.listdir(checkpoints))}")
    return f"step-{interrupted} was being written: left as {saving[0]}, resumed from step-{newest}, replaced"


def safetensors_tensors(folder):
    """{name: (dtype, shape, bytes)} of every .safetensors file in a checkpoint folder (the format:
    an 8-byte little-endian header length, a JSON header of offsets, the data)."""
    out = {}
    for entry in sorted(os.listdir(folder)):
        if not entry.endswith(".safetensors"):
            continue
        with open(os.path.join(folder, entry), "rb") as f:
            blob = f.read()
        length = struct.unpack("<Q", blob[:8])[0]
        header = json.loads(blob[8:8 + length])
        for name, info in header.items():
            if name == "__metadata__":
                continue
            begin, end = info["data_offsets"]
            out[name] = (info["dtype"], info["shape"], blob[8 + length + begin:8 + length + end])
    return out


def largest_difference(a, b):
    """The largest |x - y| over two F32 tensors' values."""
    n = len(a) // 4
    xs, ys = struct.unpack(f"<{n}f", a), struct.unpack(f"<{n}f", b)
    return max((abs(x - y) for x, y in zip(xs, ys)), default=0.0)


def case_elastic_3_to_2(case):
    """torchrun's elastic agent on 3 nodes (--nnodes 2:3); node 2 cut off mid-run: the other two
    re-rendezvous, restart their ranks at world 4, which resume from the newest checkpoint (saved
    at world 6) and finish; their final weights equal a 4-rank run resumed from that checkpoint."""
    if not case.torchrun or not os.path.exists(case.torchrun):
        return f"SKIP: no torchrun at '{case.torchrun}' (pass --torchrun; tools/dev's .venv has it)"

    def agent(node, tail):
        return [case.torchrun, "--nnodes", "2:3", "--nproc_per_node", "2", "--max-restarts", "3", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", f"{case.cluster.address(0)}:{MASTER_PORT}", "--rdzv-id", "loom-elastic",
                # is_host: torchrun decides who serves the rendezvous by the hostname, which every
                # namespace shares with this machine
                "--rdzv-conf", f"join_timeout=60,last_call_timeout=3,is_host={'true' if node == 0 else 'false'}",
                # the address the others reach this node's agent store at: the shared hostname would not do
                "--local-addr", case.cluster.address(node), "--no_python", case.host, *tail]
    return elastic_3_to_2(case, agent, r"by torchrun's elastic agent")


def case_launch_elastic_3_to_2(case):
    """The same with `host launch --nnodes 2:3` on each node instead of torchrun: the launcher
    on node 0's address serves the rendezvous store, the others join it."""
    def launcher(node, tail):
        return [case.host, "launch", "--nnodes", "2:3", "--nproc-per-node", "2", "--max-restarts", "3", "--rdzv-id",
                "loom-elastic", "--rdzv-last-call", "3", "--rdzv-timeout", "60", "--master-addr",
                case.cluster.address(0), "--master-port", str(MASTER_PORT), "--", *tail]
    return elastic_3_to_2(case, launcher, r"by host launch \(.+\)")


def elastic_3_to_2(case, agent_argv, restarted_by):
    """Three agents (agent_argv(node, ["run", manifest, ...])), node 2 cut off mid-run; the final
    weights against a 4-rank run resumed from the checkpoint the restart resumed from."""
    steps = 30
    m = write_manifest(case.folder, steps, every=5)
    name = case.run_name
    run = os.path.join(case.folder, name)
    rows = ["--set", "data.batch_size=1", "--set", "run.global_batch_size=12"]  # accum 2 at 6 ranks, 3 at 4
    agents = []
    for node in range(3):
        argv = agent_argv(node, ["run", m, "--set", f"run.name={name}", *rows])
        agents.append(case.cluster.start(node, argv, os.path.join(case.folder, f"{name}-node{node}.log")))
        if node == 0:
            time.sleep(0.5)  # node 0's agent serves the store: the others find it there
    if not case.check(case.wait_for_step(run, 8, agents[:2], limit=180), "the run did not reach step 8 on 3 nodes"):
        case.wait_all(agents, 1)
        return
    case.cluster.cut(2)
    codes = case.wait_all(agents[:2], 240)
    case.wait_all(agents[2:], 1)  # the cut-off node's agent waits for a rendezvous it cannot reach
    text = case.log(name, 0) + case.log(name, 1)
    case.check(codes == [0, 0], f"nodes 0 and 1 exited {codes}:\n{text[-4000:]}")
    resumed = re.findall(r"resumed from (\S+/step-(\d+)) at step", text)
    if not case.check(resumed, f"no rank resumed:\n{text[-4000:]}"):
        return
    checkpoint, step = resumed[-1]
    case.check(re.search(r"resumed from \S+ at step \d+ after restart \d+ " + restarted_by + r", data-parallel "
                         r"ranks 6 -> 4", text) is not None, f"the resume does not say restart and world sizes:\n{text[-3000:]}")
    world = re.findall(r"rank 0 of (\d+) joined", text)
    case.check(world[-1:] == ["4"], f"the last attempt ran at world sizes {world}, not 4")
    # The reference: 4 ranks of one launcher, resumed from the same checkpoint.
    ref = subprocess.run([case.host, "launch", "--nproc-per-node", "4", "--", "run", m, "--set", "run.name=ref", *rows,
                          "--set", f"checkpoint.resume={checkpoint}"], capture_output=True, text=True)
    if not case.check(ref.returncode == 0, f"the reference run failed: {ref.stderr[-3000:]}"):
        return
    last = f"checkpoints/step-{steps}"
    a = safetensors_tensors(os.path.join(run, last))
    b = safetensors_tensors(os.path.join(case.folder, "ref", last))
    weights = [k for k in a if k.startswith("model/")]
    case.check(weights and sorted(weights) == sorted(k for k in b if k.startswith("model/")), "the weights differ in names")
    worst = max((largest_difference(a[k][2], b[k][2]) for k in weights if k in b), default=0.0)
    case.check(worst <= 1e-5, f"final weights differ by {worst:.3g} from the 4-rank run resumed at step {step}")
    case.check_nothing_left(run)
    return f"restarted at world 4 from step-{step} (saved at world 6); final weights within {worst:.2g} of the reference"


def case_slow_link(case):
    node = case.cluster.nodes[1]
    added = subprocess.run(["ip", "netns", "exec", node, "tc", "qdisc", "add", "dev", "eth0", "root", "netem", "delay",
                            "50ms", "loss", "5%"], capture_output=True, text=True)
    if added.returncode != 0:
        return "SKIP: tc netem is not available here (" + (added.stderr.strip() or "no tc") + \
               "; this kernel lacks sch_netem)"
    return case_clean(case)


CASES = {"clean": case_clean, "node_killed": case_node_killed, "node_cut": case_node_cut,
         "master_killed": case_master_killed, "cut_at_start": case_cut_at_start, "killed_saving": case_killed_saving,
         "elastic_3_to_2": case_elastic_3_to_2, "launch_elastic_3_to_2": case_launch_elastic_3_to_2,
         "slow_rate": case_slow_rate, "slow_link": case_slow_link}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", required=True)
    parser.add_argument("--tmp", required=True)
    parser.add_argument("--torchrun", default="", help="PyTorch's torchrun, for the elastic case")
    parser.add_argument("--only", default=",".join(CASES))
    args = parser.parse_args()
    args.host = os.path.abspath(args.host)
    args.tmp = os.path.abspath(args.tmp)
    if os.geteuid() != 0:
        print("SKIP: network namespaces need root")
        return SKIP
    if shutil.which("ip") is None:
        print("SKIP: iproute2's ip is not installed")
        return SKIP
    probe = ip("netns", "add", f"lmnprobe{os.getpid()}", check=False)
    if probe.returncode != 0:
        print(f"SKIP: cannot create a network namespace: {probe.stderr.strip()}")
        return SKIP
    ip("netns", "del", f"lmnprobe{os.getpid()}", check=False)
    failed = 0
    for name in args.only.split(","):
        with Cluster(3 if "elastic" in name else 2) as cluster:
            case = Case(args, cluster, name)
            started = time.monotonic()
            try:
                said = CASES[name](case)
            except Exception as e:  # a harness failure is the case's failure, and the next case still runs
                case.failures.append(f"{type(e).__name__}: {e}")
                said = None
            took = time.monotonic() - started
            if isinstance(said, str) and said.startswith("SKIP"):
                print(f"SKIP {name}: {said[6:]}", flush=True)
            elif case.failures:
                failed += 1
                print(f"FAIL {name} ({took:.1f} s):\n  " + "\n  ".join(case.failures), flush=True)
            else:
                print(f"PASS {name} ({took:.1f} s): {said}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
