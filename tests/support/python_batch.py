#!/usr/bin/python3
"""python_batch.py SCRIPT LISTING: runs each line of LISTING as `python3 SCRIPT LINE` would
(the line split as a shell splits it), all in this one process, so that a reference script's
imports (torch, transformers: seconds each time) are paid once for a test's dozens of calls.
SCRIPT must define main() that reads sys.argv, as the references under tests/ do, and keep no
state between calls that a call does not set itself (seeds are set per command). The first
line that fails stops the batch: its exit status, and a line naming it on stderr."""
import importlib.util
import os
import shlex
import sys
import traceback


def main():
    if len(sys.argv) != 3:
        print("usage: python_batch.py SCRIPT LISTING", file=sys.stderr)
        return 2
    script, listing = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))  # the script's own imports
    spec = importlib.util.spec_from_file_location("reference_script", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with open(listing) as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    for number, line in enumerate(lines, 1):
        sys.argv = [script] + shlex.split(line)
        try:
            status = module.main()
        except SystemExit as exit_:
            status = exit_.code
        except Exception:  # the traceback, then the line that raised it
            traceback.print_exc()
            status = 1
        if status:
            print(f"python_batch.py: line {number} of {listing} failed ({status}): {line}", file=sys.stderr)
            return status if isinstance(status, int) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
