#!/usr/bin/env python3
"""Summarises the liveness simulation over many seeds (tests/unit/assignment/leader_liveness_test.cpp).

Runs the seeded fleets (a quarter and a twentieth of the coordination calls failing) for
--seeds seeds each and prints, per fault level, the p50 / p99 / max of the longest silent owner
and of the longest takeover, and the seeds over each test's bound:

    python3 bench/liveness_sweep.py --binary build/release/tests/unit_assignment --seeds 600

or reads the output of an earlier run (--log FILE) instead of running it.
"""
import argparse
import os
import re
import subprocess
import sys

LINE = re.compile(r"seed (\d+): longest silent owner (\d+) ms .*longest takeover (\d+) ms")
TEST = re.compile(r"\[ RUN      \] Seeds/LeaderLivenessTest\.(\w+)/")
LEVELS = {"UnderTheSoaksFaultsEveryOwnerReadsAndEveryTakeoverIsQuick": ("5%", 10000),
          "WithAQuarterOfCoordinationCallsFailingKilledWorkersShardsMoveInTime": ("25%", 13000)}


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="build/release/tests/unit_assignment")
    ap.add_argument("--seeds", type=int, default=600)
    ap.add_argument("--log", help="read this output instead of running the binary")
    a = ap.parse_args()
    failed_run = None
    if a.log:
        text = open(a.log).read()
    else:
        env = dict(os.environ, KCL_TEST_SEEDS=str(a.seeds))
        run = subprocess.run([a.binary, "--gtest_filter=Seeds/*"], env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        text = run.stdout
        if run.returncode != 0:
            failed_run = run.returncode
    runs = {}
    level = None
    for line in text.splitlines():
        m = TEST.search(line)
        if m:
            level = LEVELS.get(m.group(1))
            continue
        m = LINE.search(line)
        if m and level:
            runs.setdefault(level, []).append((int(m.group(1)), int(m.group(2)), int(m.group(3))))
    if not runs:
        sys.exit("no seeded runs found")
    print("faults  seeds  silent owner p50 / p99 / max (ms)  takeover p50 / p99 / max (ms)  over the bound")
    for (name, bound), rs in sorted(runs.items(), key=lambda kv: kv[0][1]):
        silent = [r[1] for r in rs]
        take = [r[2] for r in rs]
        over = [str(r[0]) for r in rs if r[1] > bound or r[2] > bound]
        print(f"{name:>6}  {len(rs):>5}  {pct(silent, 50):>6} / {pct(silent, 99):>6} / {max(silent):>6}"
              f"            {pct(take, 50):>6} / {pct(take, 99):>6} / {max(take):>6}"
              f"      {len(over)} (bound {bound} ms){': seeds ' + ', '.join(over) if over else ''}")
    # A seed that failed an assertion (two owners of a lease, say) or a run cut short must not
    # read as a clean table: say so and exit non-zero.
    problems = [l.strip() for l in text.splitlines() if l.startswith("[  FAILED  ]")]
    if failed_run is not None:
        problems.append(f"the test binary exited {failed_run}")
    expected = None if a.log else a.seeds
    for (name, _), rs in runs.items():
        if expected is not None and len(rs) != expected:
            problems.append(f"{name}: {len(rs)} seeds of {expected} ran")
    if len(runs) != len(LEVELS):
        problems.append(f"{len(runs)} fault levels of {len(LEVELS)} ran")
    if problems:
        sys.exit("liveness_sweep: NOT a clean run:\n  " + "\n  ".join(problems))


if __name__ == "__main__":
    main()
