#!/usr/bin/env python3
"""tools/check-layers refuses what its rules 6-8 name: planted in a copy of the tree, each
violation must be reported as one line naming the file, the line and the fix, and the clean
copy must pass. (Rules 1-5 are held by the real tree passing layers_check.)"""

import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
CHECK = os.path.join(ROOT, "tools", "check-layers")


def run(root):
    done = subprocess.run([sys.executable, CHECK, "--root", root], capture_output=True, text=True)
    return done.returncode, done.stdout


def main():
    work = tempfile.mkdtemp(prefix="check-layers-")
    try:
        for folder in ("kernel", "ops", "formats", "plugins"):
            shutil.copytree(os.path.join(ROOT, folder), os.path.join(work, folder),
                            ignore=shutil.ignore_patterns("build*", ".*"))
        code, out = run(work)
        assert code == 0, "the clean copy fails:\n" + out
        planted = {
            "plugins/planted/uses_private.cpp": '#include "gelu_tanh_cpu.hpp"\n',
            "plugins/planted/no_such_op.cpp": "#include <loom_ops/no_such_op.hpp>\n",
            "plugins/planted/path_into_ops.cpp": '#include "../../ops/include/loom_ops/gelu_tanh.hpp"\n',
            "plugins/planted/bare_shared.cpp": '#include "files.hpp"\n',
            "ops/planted/reaches_out.cpp": "#include <loom/plugin.hpp>\n#include \"../rotary/none.hpp\"\n",
        }
        for rel, text in planted.items():
            os.makedirs(os.path.dirname(os.path.join(work, rel)), exist_ok=True)
            with open(os.path.join(work, rel), "w") as f:
                f.write(text)
        code, out = run(work)
        expected = [
            "plugins/planted/uses_private.cpp:1: includes \"gelu_tanh_cpu.hpp\", a file private to ops/gelu_tanh/",
            "plugins/planted/no_such_op.cpp:1: includes <loom_ops/no_such_op.hpp>, which ops/include/loom_ops/ does not have",
            "plugins/planted/path_into_ops.cpp:1: includes \"../../ops/include/loom_ops/gelu_tanh.hpp\"; write #include <loom_ops/gelu_tanh.hpp>",
            "plugins/planted/bare_shared.cpp:1: include \"files.hpp\" does not name its folder; write #include \"formats/files.hpp\"",
            "ops/planted/reaches_out.cpp:1: includes <loom/plugin.hpp>, but ops/ includes nothing of Loom's",
            "ops/planted/reaches_out.cpp:2: includes \"../rotary/none.hpp\", which is not a file beside it",
        ]
        assert code == 1, "exit %d, not 1:\n%s" % (code, out)
        for line in expected:
            assert any(got.startswith(line) for got in out.splitlines()), "missing: %s\nin:\n%s" % (line, out)
        assert len(out.splitlines()) == len(expected), "more than the planted problems:\n" + out
        print("check-layers: %d planted problems reported, the clean copy passes" % len(expected))
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
