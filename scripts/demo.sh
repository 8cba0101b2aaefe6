#!/usr/bin/env bash
# The kcl-cpp demo (about two minutes): installs the dependencies, builds the `kcl` command
# line and the checking worker into build/release, then runs the demo scenario against local
# emulators (kinesalite + dynalite): a 4-shard stream, a producer writing records with a
# per-key counter, 3 workers sharing the shards through the lease table (failover 3 s), a
# shard split, a merge, one worker SIGKILLed and restarted, a graceful stop — and a
# verification: records produced and processed, duplicates, per-key order violations,
# takeover time after the kill, start time of the children after the split and the merge.
# Exits non-zero if a record was lost or processed out of order.
#
#   bash scripts/demo.sh                 # everything
#   KCL_SKIP_DEPS=1 bash scripts/demo.sh # skip the dependency check
#   KCL_JOBS=2 bash scripts/demo.sh      # build parallelism (default: nproc)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
if [ "${KCL_SKIP_DEPS:-0}" != "1" ]; then
  bash scripts/install-deps.sh
fi
build_dir="${KCL_BUILD_DIR:-build/release}"
jobs="${KCL_JOBS:-$(nproc)}"
echo "=== building kcl and kcl_check_worker in $build_dir ==="
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKCL_WERROR=ON >/dev/null
cmake --build "$build_dir" -j "$jobs" --target kcl_cli kcl_check_worker
echo "=== running the demo scenario ==="
exec node tools/scenario/run.js --profile demo --build-dir "$build_dir" "$@"
