#!/usr/bin/env bash
# The main job on a fresh machine (no cluster, no Prometheus): install the package and its
# plot extra in .venv from the lock (the first time only), and simulate the shipped example,
# a day of traffic with a ramp, a spike and a lull, through the exact HPA core the daemon
# runs. Writes out/simulation.png, the timeline and a summary. Extra arguments go to
# `autoscaler simulate`.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f .venv/.autoscaler-install ]; then
  echo "== .venv: checking the install is up to date"
else
  echo "== .venv: installing the package and matplotlib from requirements/plot.txt (once; ~30 s)"
fi
bash scripts/install.sh .venv plot --editable
echo "== simulating a day of traffic through the HPA core (config/examples/simulate/)"
.venv/bin/autoscaler simulate \
  --config config/examples/simulate/web.toml \
  --workload config/examples/simulate/workload.toml \
  --trace config/examples/simulate/day.csv \
  --out out/ "$@"
echo "== the picture: out/simulation.png; the command: .venv/bin/autoscaler (or source .venv/bin/activate)"
