#!/usr/bin/env bash
# Install the package into a virtualenv exactly as locked: every package of
# requirements/SET.txt at its pinned version, each file's hash checked, then the package
# itself without dependencies, built by the locked setuptools (no build-time download).
# The Dockerfile runs the same two pip commands (apart, so its layers cache).
#
#   scripts/install.sh VENV SET [--editable]
#   SET: daemon (what the daemon needs; the image), plot (daemon + matplotlib; the demo),
#        test (everything; CI). The virtualenv is created if it does not exist.
#
# The core installs as pure Python; AUTOSCALER_COMPILE=1 compiles it with mypyc (setup.py;
# the test set has mypy, the others fall back to pure Python and say so). An editable install
# that is already up to date (the same lock, build files and choice, a record in VENV) is left
# as it is: its code is the checkout's, so only those files can make it stale.
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

record=$venv/.autoscaler-install
wanted=$( { echo "$set $editable ${AUTOSCALER_COMPILE:-} $root"; "$venv/bin/python" -V;
            cat "$lock" "$root/pyproject.toml" "$root/setup.py" \
                "$root/build_backend/autoscaler_backend.py"; } | sha256sum | cut -d' ' -f1)
if [ -n "$editable" ] && [ -f "$record" ] && [ "$(cat "$record")" = "$wanted" ] \
   && [ -x "$venv/bin/autoscaler" ]; then
  exit 0
fi
rm -f "$record"

pip() { "$venv/bin/python" -m pip -q --disable-pip-version-check "$@"; }
pip install --require-hashes -r "$lock"
source=$root
if [ -z "$editable" ]; then
  # Built from a copy of what the Dockerfile copies: a build in the checkout leaves build/
  # behind, from which setuptools would ship a deleted module the next time.
  source=$(mktemp -d)
  trap 'rm -rf "$source"' EXIT
  cp -R "$root/pyproject.toml" "$root/README.md" "$root/setup.py" "$root/MANIFEST.in" \
        "$root/build_backend" "$root/autoscaler" "$source/"
fi
pip install --no-deps --no-build-isolation $editable "$source"
[ -z "$editable" ] || echo "$wanted" > "$record"
