# tools/bench/benchlib.py: small helpers shared by the benchmarks.
#
# Benchmarks print numbers and never pass or fail on them. Everything here is plain Python 3
# (no torch): the project's Python to run torch peers with, a frozen copy of the built host,
# process timing, medians, machine facts, the real tokenizer files, and evicting one file from
# the page cache without root.
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# The project's Python environment (tools/dev makes it): its torch is the very LibTorch the host
# is built against, so a Python peer measures the same library, not another build of it.
PYTHON = os.path.join(ROOT, ".venv", "bin", "python")


def use_project_python():
    """For a benchmark that imports torch: runs this script again under .venv's Python when
    another one started it (the shebang's /usr/bin/python3 has no torch)."""
    if os.path.realpath(sys.prefix) == os.path.realpath(os.path.join(ROOT, ".venv")):
        return
    if not os.access(PYTHON, os.X_OK):
        sys.exit(f"{PYTHON} is missing: run tools/dev build first (it makes .venv/ with the pinned torch)")
    os.execv(PYTHON, [PYTHON, os.path.abspath(sys.argv[0])] + sys.argv[1:])


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def tokenizer_dir(name):
    """The real tokenizer files of `name` (tokenizer.json, tokenizer_config.json): other people's
    files, never committed; in ../shared/tokenizers beside the repository or $LOOM_TOKENIZER_FILES."""
    root = os.environ.get("LOOM_TOKENIZER_FILES") or os.path.join(ROOT, "..", "shared", "tokenizers")
    path = os.path.normpath(os.path.join(root, name))
    if not os.path.isfile(os.path.join(path, "tokenizer.json")):
        sys.exit(f"no real tokenizer files at {path} (put them in ../shared/tokenizers or name their folder in LOOM_TOKENIZER_FILES)")
    return path


def python():
    """The project's Python (.venv from tools/dev: tokenizers, tiktoken, transformers), else this one."""
    venv = os.path.join(ROOT, ".venv", "bin", "python")
    return venv if os.path.exists(venv) else sys.executable


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def freeze_host(build_dir, scratch):
    """Copies build/bin/host and its plugin folder into scratch/ and returns the copy's path.

    Other people rebuild build/ while a benchmark runs; the copy keeps every repetition on the
    same binary. The host finds plugins in ../lib/loom/plugins beside itself, so the copy is
    self-contained (it links only system libraries)."""
    src_host = os.path.join(build_dir, "bin", "host")
    src_plugins = os.path.join(build_dir, "lib", "loom", "plugins")
    if not os.access(src_host, os.X_OK) or not os.path.isdir(src_plugins):
        sys.exit(f"{src_host} or {src_plugins} is missing: build first "
                 "(cmake --build build --target host, or tools/dev build)")
    host = os.path.join(scratch, "bin", "host")
    os.makedirs(os.path.dirname(host))
    shutil.copy2(src_host, host)
    shutil.copytree(src_plugins, os.path.join(scratch, "lib", "loom", "plugins"))
    return host


def run(cmd, env=None, check=True):
    """Runs cmd; returns (seconds of wall time, stdout, stderr)."""
    started = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-3000:]}")
    return seconds, p.stdout, p.stderr


def read_metrics(path):
    """metrics.jsonl -> {step: record}; a later record of the same step wins."""
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                r = json.loads(line)
                out[int(r["step"])] = r
    return out


def evict(path):
    """Drops a file's pages from the page cache (they must be clean, so fsync first). Needs no
    root: posix_fadvise(DONTNEED) works on any file we can open. Returns the pages still cached
    according to fincore, or None when fincore is not installed."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    if shutil.which("fincore"):
        out = subprocess.run(["fincore", "-nbo", "RES", path], capture_output=True, text=True).stdout.split()
        return int(out[0]) if out else None
    return None


def machine():
    """Facts about where the numbers come from."""
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": os.cpu_count(),
        "cpu": model,
        "kernel": platform.release(),
        "loadavg_start": os.getloadavg()[0],
        "git_head": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                   text=True).stdout.strip(),
    }


def write_json(path, data, merge=False):
    """Writes data as JSON. merge: the keys of an existing file that data lacks stay (a run of one
    section of a benchmark leaves the other sections' numbers alone)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if "machine" in data:
        data["machine"]["loadavg_end"] = os.getloadavg()[0]
    out = data
    if merge and os.path.exists(path):
        with open(path) as f:
            out = json.load(f)
        out.update(data)
    with open(path, "w") as f:
        json.dump(out, f, indent=2)
        f.write("\n")
    log(f"wrote {path}" + (f" ({', '.join(data)} replaced, the rest kept)" if out is not data else ""))


def table(rows, header):
    """Prints an aligned text table to stdout."""
    cells = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for n, r in enumerate(cells):
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
        if n == 0:
            print("  ".join("-" * w for w in widths))
