#!/usr/bin/env bash
# tools/bench/token_file_bench.sh: read throughput and peak RSS of the token_file dataset on a
# 1 GiB token file. A benchmark: it prints numbers and never passes or fails on them.
#
#   tools/bench/token_file_bench.sh [--consume TOKENS_PER_S] [--gb N] [--seq-len T]
#                                   [--batch-size B] [--vocab-size V] [--keep]
#
#   --consume   tokens/s the training run consumes (the tok/s the gpt example logs); the
#               report divides the read rate by it (the issue's target is at least 50x)
#   --gb        size of the generated file in GiB (default 1)
#   --keep      keep the generated file in /tmp for another run
# Environment: BUILD_DIR (default build) holds the token_file plugin; it is built if missing.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
consume="" gb=1 seq_len=256 batch_size=8 vocab_size=0 keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --consume) consume="$2"; shift 2 ;;
    --gb) gb="$2"; shift 2 ;;
    --seq-len) seq_len="$2"; shift 2 ;;
    --batch-size) batch_size="$2"; shift 2 ;;
    --vocab-size) vocab_size="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    *) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done

plugin="$build_dir/lib/loom/plugins/token_file.so"
if [ ! -f "$plugin" ]; then
  [ -f "$build_dir/CMakeCache.txt" ] || cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build_dir" --target token_file >/dev/null
fi

# The driver is torch-free and small: compile it straight against the SDK headers.
bench="$build_dir/bench/token_file_bench"
mkdir -p "$(dirname "$bench")"
if [ ! -x "$bench" ] || [ "$root/tools/bench/token_file_bench.cpp" -nt "$bench" ] ||
   [ "$root/tests/support/standin_host.hpp" -nt "$bench" ]; then
  c++ -O2 -std=c++17 -I"$root/sdk/include" -I"$root/plugins/datasets/common" -I"$root/tests/support" \
    "$root/tools/bench/token_file_bench.cpp" -ldl -o "$bench"
fi

file="/tmp/loom-bench-${gb}g.tok"
[ -f "$file" ] || "$bench" generate "$file" --gb "$gb"
[ "$keep" = 1 ] || trap 'rm -f "$file"' EXIT

echo "machine: $(nproc) cores, $(uname -r); the file was just written or kept, so it is in the page cache"
args=(read "$plugin" "$file" --batch-size "$batch_size" --seq-len "$seq_len" --vocab-size "$vocab_size")
[ -z "$consume" ] || args+=(--consume "$consume")
"$bench" "${args[@]}"
