#!/usr/bin/env bash
# Install everything the tests need (Debian's prometheus, kubectl check, a virtualenv with the
# package and its test extras, as locked in requirements/test.txt, and a wheelhouse of the
# locked packages for the install tests, which run offline), then lint, type-check, check the
# architecture contracts and run the whole test suite against the pure-Python core, then the
# core's and the simulator's tests again against the mypyc-compiled core (where a C compiler
# and the Python headers are). Safe to run again: each step is skipped when already done.
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
echo "== the locked packages as files, for the install tests (offline): .cache/wheelhouse"
.venv/bin/python -m pip download -q --disable-pip-version-check --require-hashes \
  -r requirements/test.txt -d .cache/wheelhouse

echo "== ruff";         .venv/bin/ruff check -q .
echo "== mypy";         .venv/bin/mypy
echo "== import-linter"; .venv/bin/lint-imports --no-cache
echo "== pytest (the pure-Python core)"
status=0
.venv/bin/python -m pytest "$@" || status=$?

include=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
if command -v cc >/dev/null && [ -f "$include/Python.h" ]; then
  echo "== pytest (the core's and the simulator's tests, against the compiled core)"
  # In a copy of the checkout, so that its compiled modules stay out of this one.
  copy=$(mktemp -d)
  trap 'rm -rf "$copy"' EXIT
  git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$copy"
  (cd "$copy" && AUTOSCALER_COMPILE=1 "$OLDPWD/.venv/bin/python" setup.py -q build_ext --inplace \
     > compile.log 2>&1) || true
  grep '^autoscaler:' "$copy/compile.log" || tail -20 "$copy/compile.log"
  (cd "$copy" && AUTOSCALER_EXPECT_CORE=compiled "$OLDPWD/.venv/bin/python" -m pytest "$@" \
     tests/algorithm tests/simulate tests/shipping/test_compiled_core.py tests/test_record.py) \
    || status=$?
else
  echo "== no C compiler or no Python headers here: the compiled core is not tested (the pure one was)"
fi
exit "$status"
