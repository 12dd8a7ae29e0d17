"""Every ordinary install works, for real, from a fresh virtualenv with build isolation on, with
no network (the locked packages from a wheelhouse), and with or without a C compiler:
bench/install_matrix.py runs each command and the installed ``autoscaler``; this checks what
each row must give."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.shipping.offline import install_matrix, wheelhouse_or_skip

ROOT = Path(__file__).parents[2]
FALLBACK_ROWS = {name for name, spec in install_matrix.ROWS.items() if spec.falls_back}


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    wheelhouse = wheelhouse_or_skip()
    out = tmp_path_factory.mktemp("matrix") / "rows.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "install_matrix.py"), "--wheelhouse",
         str(wheelhouse), "--json", str(out)],
        capture_output=True, text=True, timeout=1500, check=False)
    print(done.stdout)
    assert out.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    return {row["name"]: row for row in json.loads(out.read_text())}


@pytest.mark.timeout(1600)
@pytest.mark.parametrize("name", list(install_matrix.ROWS))
def test_the_install_works(rows: dict[str, dict[str, object]], name: str) -> None:
    """The command installs, and the installed ``autoscaler`` runs ``--version`` and ``check``
    from outside the checkout, with the core the row must give."""
    row = rows[name]
    assert not row["error"], row["error"]
    assert row["core"] == install_matrix.ROWS[name].core


@pytest.mark.timeout(1600)
@pytest.mark.parametrize("name", sorted(FALLBACK_ROWS))
def test_a_failed_compile_says_so_in_one_line(rows: dict[str, dict[str, object]],
                                               name: str) -> None:
    """Asked to compile and unable to (no compiler, a type error, a missing header): one line
    says why, and the install goes on with the pure-Python core."""
    line = str(rows[name]["fallback_line"])
    assert line.startswith("autoscaler: the compiled core could not be built ("), line
    assert line.endswith("installing the pure-Python core instead (same behaviour, slower "
                         "decisions and simulations)")


@pytest.mark.timeout(1600)
def test_no_other_install_speaks_of_a_fallback(rows: dict[str, dict[str, object]]) -> None:
    """An install that was not asked to compile, or that compiled, prints no fallback line."""
    assert {name for name, row in rows.items() if row["fallback_line"]} == FALLBACK_ROWS
