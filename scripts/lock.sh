#!/usr/bin/env bash
# Write the lock: requirements/test.txt (CI: everything), plot.txt (the demo: the package and
# matplotlib) and daemon.txt (the image and the systemd install), each pinning every package
# with the hashes of all its files on PyPI, so `pip install --require-hashes` installs the
# same bytes on any machine. One resolution for every platform and Python >= 3.11 (uv's
# --universal): the test set is resolved first and the other two are cut from it, so a
# package has one version in all three. The build backend (pyproject's build-system) is in
# each, since installs build the package without fetching anything (--no-build-isolation).
#
#   scripts/lock.sh                  # after editing pyproject's dependencies: keeps what it can
#   scripts/lock.sh --upgrade        # move every package to its newest allowed version
#   scripts/lock.sh -P matplotlib    # move one (uv's --upgrade-package)
set -euo pipefail
cd "$(dirname "$0")/.."
UV_VERSION=0.13.9
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/uv"
"$work/uv/bin/python" -m pip install -q --disable-pip-version-check "uv==$UV_VERSION"
build_requires=$(python3 -c 'import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))')

# The build requirements come on stdin (-): a file would put its temporary path in the output.
compile() {
  "$work/uv/bin/uv" pip compile --quiet --universal --python-version 3.11 --generate-hashes \
    --custom-compile-command "scripts/lock.sh" pyproject.toml - "$@" <<<"$build_requires"
}
compile --extra test -o requirements/test.txt "$@"
compile --extra plot -c requirements/test.txt -o requirements/plot.txt
compile -c requirements/test.txt -o requirements/daemon.txt
echo "wrote requirements/test.txt, plot.txt, daemon.txt"
