#!/usr/bin/env python3
"""Checks that gyre's includes point down its layers only (docs/architecture.md, "Layers").

Every source file belongs to a layer by its folder (src/LAYER/, include/gyre/..., apps/, bench/,
python/, examples/); every `#include "..."` names a header of a layer. A file may include headers
of its own layer and of the layers below; an include of a higher layer is printed with its file
and line, and the script exits 1. Run by ctest (test `layers`) and by hand:

    scripts/check-layers.py [ROOT]         # the repository (default: this script's parent)
    scripts/check-layers.py --self-test    # checks the checker on a small tree of its own

Python 3 standard library only.
"""
import os
import re
import sys
import tempfile

# Level of each layer: a file may include a header whose level is not higher than its own.
LEVELS = {
    "common": 0, "data": 1,
    "transport": 1, "rendezvous": 1, "engine": 1,
    "collectives": 2,
    "api": 3,
    "torch": 4, "ps": 4, "rt": 4, "launcher": 4, "elastic": 4, "metrics": 4, "plot": 4,
    "bootstrap": 4,
    "train": 5, "tune": 5, "rl": 5, "report": 5, "python": 5, "info": 5, "serve": 5,
    "apps": 6, "bench": 6, "examples": 6, "tests": 7,
}

# Public headers (include/gyre/...) by the layer that implements them.
PUBLIC = {
    "gyre/errors.h": "common", "gyre/types.h": "common", "gyre/version.h": "common",
    "gyre/store.h": "rendezvous", "gyre/shared_memory.h": "transport", "gyre/work.h": "engine",
    "gyre/communicator.h": "api", "gyre/init.h": "api", "gyre/gyre.h": "api",
    "gyre/ps.h": "ps", "gyre/elastic.h": "elastic", "gyre/rt.h": "rt", "gyre/torch.h": "torch",
    "gyre/tune.h": "api",  # gyre::tune::report, for a trial: the launch environment, no tuner
    "gyre/serve.h": "serve",
}
PUBLIC_FOLDERS = {"gyre/torch/": "torch", "gyre/rt/": "rt", "gyre/rl/": "rl", "gyre/serve/": "serve"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of_file(rel):
    """The layer of a repository file, or None for a file outside the layers."""
    parts = rel.split("/")
    if parts[0] == "src" and len(parts) > 2:
        return parts[1]
    if parts[0] == "include":
        return layer_of_header("/".join(parts[1:]), None)
    if parts[0] in ("apps", "bench", "examples", "tests"):
        return parts[0]
    if parts[0] == "python":
        return "python"
    return None


def layer_of_header(name, including_layer):
    """The layer of an included header: a public one by PUBLIC, "LAYER/x.h" by its folder under
    src/, and a bare "x.h" (a header beside the file) by the including file's layer."""
    if name in PUBLIC:
        return PUBLIC[name]
    for prefix, layer in PUBLIC_FOLDERS.items():
        if name.startswith(prefix):
            return layer
    first = name.split("/")[0]
    if "/" in name and first in LEVELS:
        return first
    return including_layer


def violations(root):
    found = []
    for top in ("src", "include", "apps", "bench", "python", "examples"):
        for folder, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith((".h", ".cc", ".hpp", ".cpp")):
                    continue
                path = os.path.join(folder, f)
                rel = os.path.relpath(path, root)
                layer = layer_of_file(rel)
                if layer not in LEVELS:
                    continue
                with open(path, errors="replace") as text:
                    for number, line in enumerate(text, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = layer_of_header(m.group(1), layer)
                        if target in LEVELS and LEVELS[target] > LEVELS[layer]:
                            found.append(f"{rel}:{number}: {layer} (level {LEVELS[layer]}) includes "
                                         f'"{m.group(1)}" of {target} (level {LEVELS[target]}), a layer above it')
    return found


def self_test():
    with tempfile.TemporaryDirectory() as root:
        def write(rel, text):
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        write("src/common/a.h", '#include "gyre/errors.h"\n#include "common/b.h"\n')
        write("src/collectives/c.cc", '#include "common/a.h"\n#include "gyre/types.h"\n')
        write("bench/cli/d.cc", '#include "launcher/process.h"\n#include "d.h"\n')
        assert violations(root) == [], violations(root)
        write("src/common/logging.cc", '#include "gyre/init.h"\n')
        write("src/collectives/op.h", '// x\n#include "gyre/communicator.h"\n')
        write("src/torch/x.cc", '#include "train/options.h"\n')
        got = violations(root)
        assert len(got) == 3, got
        assert got[0].startswith("src/collectives/op.h:2: collectives (level 2)"), got
        assert any(g.startswith("src/common/logging.cc:1:") for g in got), got
        assert any('"train/options.h" of train' in g for g in got), got
    print("check-layers: self-test passed")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = violations(root)
    for line in found:
        print(line)
    print(f"check-layers: {len(found)} include(s) pointing up")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
