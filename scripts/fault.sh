#!/usr/bin/env bash
# The fault suite: builds the `kcl` command line and the checking worker into build/release,
# then runs the scenario runner (tools/scenario/run.js) with the fault proxy between the
# workers and the emulators: injected 500s, throttling, latency, dropped and stalled
# connections, malformed answers, SIGKILL/restart, SIGSTOP/SIGCONT (a zombie), a split, a
# merge, an outage of the emulators, wrong credentials and a wrong lease-table schema. The
# checker prints one summary line and exits non-zero on any violation.
#
#   bash scripts/fault.sh                  # the short scenario (under 3 minutes; CI runs it
#                                          # as the CTest test fault_short_scenario)
#   bash scripts/fault.sh --soak [MINUTES] # the long soak (default 30 minutes)
#   bash scripts/fault.sh --storm [MINUTES] # a quarter of the coordination table's calls
#                                          # failing while workers (the leader among them)
#                                          # are SIGKILLed one after another (default 4)
#   bash scripts/fault.sh --limits         # through the AWS-limits proxy as well
#                                          # (tools/scenario/limits_proxy.js; also after
#                                          # --soak / --storm)
#   bash scripts/fault.sh --seed 7         # other flags go to run.js
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
args=(--profile short)
if [ "${1:-}" = "--soak" ]; then
  shift
  minutes=30
  if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then minutes="$1"; shift; fi
  args=(--profile soak --minutes "$minutes")
elif [ "${1:-}" = "--storm" ]; then
  shift
  minutes=4
  if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then minutes="$1"; shift; fi
  args=(--profile storm --minutes "$minutes")
fi
if [ "${KCL_SKIP_DEPS:-0}" != "1" ]; then
  bash scripts/install-deps.sh
fi
build_dir="${KCL_BUILD_DIR:-build/release}"
jobs="${KCL_JOBS:-$(nproc)}"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKCL_WERROR=ON >/dev/null
cmake --build "$build_dir" -j "$jobs" --target kcl_cli kcl_check_worker
exec node tools/scenario/run.js "${args[@]}" --build-dir "$build_dir" "$@"
