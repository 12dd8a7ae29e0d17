#!/usr/bin/env bash
# Install everything the tests need (Debian's prometheus, kubectl check, a virtualenv with the
# package and its test extras, as locked in requirements/test.txt), then lint, type-check,
# check the architecture contracts and run the whole test suite. Safe to run again: each step
# is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
  echo "== installing Debian's prometheus (the tests start their own on loopback)"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
command -v prometheus >/dev/null || { echo "FATAL: prometheus binary missing after install" >&2; exit 1; }
if ! command -v systemd-analyze >/dev/null || ! command -v systemd-nspawn >/dev/null || ! command -v openssl >/dev/null; then
  echo "== installing systemd-analyze, systemd-nspawn and openssl (unit checks, the README's install in a booted machine, the simulated API server's TLS)"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends systemd systemd-container openssl >/dev/null
fi
# The simulated API server's fidelity is checked with the real kubectl, which the machine image
# ships (Debian's kubernetes-client is 1.20, too old for aggregated discovery).
command -v kubectl >/dev/null || { echo "FATAL: kubectl is not installed; the API-server fidelity tests need it" >&2; exit 1; }

echo "== installing the package and its test dependencies (requirements/test.txt) in .venv"
bash scripts/install.sh .venv test --editable

echo "== ruff";         .venv/bin/ruff check -q .
echo "== mypy";         .venv/bin/mypy
echo "== import-linter"; .venv/bin/lint-imports --no-cache
echo "== pytest"
exec .venv/bin/python -m pytest "$@"
