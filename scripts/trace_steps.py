#!/usr/bin/env python3
"""Steady-state step figures from a run's traces (observability.trace), for the benches.

  trace_steps.py RUN_DIR   prints "INTERVAL_MS SAVE_MS": the median time from one traced step's
                           start to the next one's on rank 0 (everything a step costs: compute,
                           communication, saves, background transfers slowing it), and the median
                           over traced steps of the slowest rank's "checkpoint save" spans (0
                           when none).
"""
import collections
import glob
import json
import statistics
import sys


def spans(path):
    events = json.load(open(path))
    events = events["traceEvents"] if isinstance(events, dict) else events
    return [e for e in events if e.get("ph") == "X"]


def main(run_dir):
    paths = sorted(glob.glob(f"{run_dir}/trace/rank-*.json"))
    if not paths:
        sys.exit(f"trace_steps.py: no trace in {run_dir}/trace")
    starts = sorted(e["ts"] for e in spans(paths[0]) if e["name"].startswith("step "))
    intervals = [(b - a) / 1000 for a, b in zip(starts, starts[1:])]
    per_save = collections.defaultdict(float)
    for path in paths:
        saves = sorted((e["ts"], e["dur"]) for e in spans(path) if e["name"] == "checkpoint save")
        for i, (_, dur) in enumerate(saves):
            per_save[i] = max(per_save[i], dur / 1000)
    save = statistics.median(per_save.values()) if per_save else 0.0
    print(f"{statistics.median(intervals):.2f} {save:.2f}")


if __name__ == "__main__":
    main(sys.argv[1])
