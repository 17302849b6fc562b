#!/usr/bin/env python3
"""Fails (exit 1) if a ctest run left any test not run, other than those listed as allowed.

usage: check_ctest_skips.py JUNIT_XML ALLOWED_LIST [EXPECTED_TESTS]

JUNIT_XML is what `ctest --output-junit FILE` wrote; ALLOWED_LIST names, one a line (# starts a
comment), the tests that may skip: in CI, the GPU tests, which need a CUDA device. ctest counts
a skip (SKIP_RETURN_CODE, gtest's [  SKIPPED ]) and a test whose executable was not built as
"not run" and still prints "100% tests passed"; this makes every one of them, outside the list,
fail CI by name with the reason its output gave.

EXPECTED_TESTS, when given, is how many tests the run had to hold: fewer (a rerun of failed tests
that found none of them, which ctest passes) fails too.

It also prints, last, the end of each failed test's output: CI's report keeps only the end of
the log, and ctest's own --output-on-failure text of a failure is far above it.
"""
import sys
import xml.etree.ElementTree as ET

FAILURE_TAIL_LINES = 25


def allowed_names(path):
    names = set()
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if line:
            names.add(line)
    return names


def reason(output):
    """The test's own words: a script's SKIP: line, or the line after gtest's "...: Skipped"."""
    lines = [l.strip() for l in output.splitlines()]
    for i, line in enumerate(lines):
        if line.startswith("SKIP:"):
            return ": " + line
        if line.endswith(": Skipped") and i + 1 < len(lines):
            return ": " + lines[i + 1]
    return ""


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    junit, allowed_path = sys.argv[1:3]
    expected = int(sys.argv[3]) if len(sys.argv) == 4 else None
    allowed = allowed_names(allowed_path)
    cases = ET.parse(junit).getroot().iter("testcase")
    ran, allowed_skips, unexpected, failed = 0, [], [], []
    for case in cases:
        name, status = case.get("name"), case.get("status")
        if status == "fail":
            failed.append((name, case.findtext("system-out") or ""))
        if status in ("run", "fail"):
            ran += 1
            continue
        if name in allowed:
            allowed_skips.append(name)
            continue
        skipped = case.find("skipped")
        why = skipped.get("message", "") if skipped is not None else status
        unexpected.append(f"  {name} ({why}){reason(case.findtext('system-out') or '')}")
    print(f"check_ctest_skips: {ran} tests ran, {len(allowed_skips)} allowed skips "
          f"({allowed_path}), {len(unexpected)} other tests did not run")
    for name, output in failed:
        tail = output.rstrip().splitlines()[-FAILURE_TAIL_LINES:]
        print(f"check_ctest_skips: {name} FAILED in the run that wrote {junit}; the last "
              f"{len(tail)} lines of its output:")
        print("\n".join("  | " + line for line in tail))
    found = ran + len(allowed_skips) + len(unexpected)
    if expected is not None and found < expected:
        print(f"check_ctest_skips: {expected} tests expected in {junit}, {found} found")
        return 1
    if unexpected:
        print("check_ctest_skips: these tests did not run (only the tests in "
              f"{allowed_path} may skip here):")
        print("\n".join(unexpected))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
