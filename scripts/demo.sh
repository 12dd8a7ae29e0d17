#!/usr/bin/env bash
# The main job on a fresh machine (no cluster, no Prometheus): install the package and its
# plot extra in .venv from the lock, and simulate the shipped example, a day of traffic with
# a ramp, a spike and a lull, through the exact HPA core the daemon runs. Writes
# out/simulation.png, the timeline and a summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh .venv plot --editable
exec .venv/bin/autoscaler simulate \
  --config config/examples/simulate/web.toml \
  --workload config/examples/simulate/workload.toml \
  --trace config/examples/simulate/day.csv \
  --out out/ "$@"
