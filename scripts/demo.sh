#!/usr/bin/env bash
# The main job on a fresh machine: install the package in .venv and run the shipped example.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e .
exec .venv/bin/autoscaler decide config/examples/decision.toml "$@"
