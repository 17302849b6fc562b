#!/usr/bin/env python3
"""Fails when a source file includes a header from a folder above its own (docs/DESIGN.md,
"Where things live"). Each folder names the folders it may include besides itself; test code
(*_test.cc, *_fuzz.cc, *test_util.h) may also use the harness in testing/ and fuzz/. Run from the repository root, or give it."""
import os
import re
import sys

# Lowest first. A folder may include itself and what it lists; nothing else of the project.
ALLOWED = {
    "io": [],
    "kernels": ["io"],
    "collectives": ["kernels", "io"],
    "checkpoint": ["collectives", "kernels", "io"],
    "configs": ["io"],
    "base": ["configs", "io"],
    "model": ["base", "configs", "kernels", "io"],
    "planning": ["model", "base", "configs", "kernels", "collectives", "io"],
    "observe": ["base", "checkpoint", "io"],
    "worker": ["planning", "observe", "model", "base", "configs", "checkpoint", "collectives",
               "kernels", "io"],
    "bench": ["collectives", "checkpoint", "kernels", "io", "base"],
    "launcher": ["worker", "planning", "observe", "model", "base", "configs", "checkpoint",
                 "collectives", "kernels", "io", "bench"],
}
# Test programs and harness: anything of the project.
ANYTHING = {"tests", "testing", "fuzz"}
SOURCE = re.compile(r"\.(cc|h|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def main() -> int:
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    folders = set(ALLOWED) | ANYTHING
    bad = []
    for top in sorted(ALLOWED):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not SOURCE.search(name):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                is_test = re.search(r"(_test|_fuzz)\.cc$|test_util\.h$", name) is not None
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                for header in INCLUDE.findall(text):
                    target = header.split("/")[0]
                    if target not in folders or target == top:
                        continue
                    if target in ALLOWED[top] or (is_test and target in ("testing", "fuzz")):
                        continue
                    bad.append(f"{rel}: includes \"{header}\" ({top}/ may include only "
                               f"{', '.join(t + '/' for t in ALLOWED[top]) or 'itself'})")
    for line in bad:
        print(line)
    if bad:
        print(f"check-layers: {len(bad)} include(s) run back up the layers")
        return 1
    print("check-layers: every include runs down the layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
