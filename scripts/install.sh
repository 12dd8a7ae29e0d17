#!/usr/bin/env bash
# Install the package into a virtualenv exactly as locked: every package of
# requirements/SET.txt at its pinned version, each file's hash checked, then the package
# itself without dependencies, built by the locked setuptools (no build-time download).
# The Dockerfile runs the same two pip commands (apart, so its layers cache).
#
#   scripts/install.sh VENV SET [--editable]
#   SET: daemon (what the daemon needs; the image), plot (daemon + matplotlib; the demo),
#        test (everything; CI). The virtualenv is created if it does not exist.
set -euo pipefail
if [ $# -lt 2 ] || [ $# -gt 3 ] || { [ $# -eq 3 ] && [ "$3" != --editable ]; }; then
  echo "usage: $0 VENV daemon|plot|test [--editable]" >&2
  exit 2
fi
venv=$1 set=$2 editable=${3:+-e}
root=$(cd "$(dirname "$0")/.." && pwd)
lock=$root/requirements/$set.txt
[ -f "$lock" ] || { echo "$0: no lock for '$set' ($lock): use daemon, plot or test" >&2; exit 2; }
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
pip() { "$venv/bin/python" -m pip -q --disable-pip-version-check "$@"; }
pip install --require-hashes -r "$lock"
source=$root
if [ -z "$editable" ]; then
  # Built from a copy of what the Dockerfile copies: a build in the checkout leaves build/
  # behind, from which setuptools would ship a deleted module the next time.
  source=$(mktemp -d)
  trap 'rm -rf "$source"' EXIT
  cp -R "$root/pyproject.toml" "$root/README.md" "$root/autoscaler" "$source/"
fi
pip install --no-deps --no-build-isolation $editable "$source"
