"""The token file: looked at once per check period, re-read on change or on demand, and the last
good token kept when the file cannot be read."""

from pathlib import Path

import pytest
import structlog
from kubernetes_asyncio.client import Configuration

from autoscaler.adapters.kube.token_file import CHECK_PERIOD, TokenFile


class Clock:
    """Monotonic seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def replace(path: Path, text: str) -> None:
    """Replace the file by a new one, as kubelet's atomic swap and ``mv`` do."""
    staged = path.with_name(path.name + ".new")
    staged.write_text(text)
    staged.replace(path)


@pytest.fixture
def token(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text("first\n")
    return path


@pytest.mark.parametrize(("elapsed", "expected"),
                         [(0.0, "first"), (CHECK_PERIOD / 2, "first"), (CHECK_PERIOD, "second")],
                         ids=["at-once", "within-period", "after-period"])
def test_change_is_seen_after_the_check_period(token: Path, elapsed: float,
                                               expected: str) -> None:
    """A rewritten file is read again at the first look after the check period, not before."""
    clock = Clock()
    source = TokenFile(token, clock=clock)
    replace(token, "second")
    clock.now += elapsed
    assert source.current() == expected


def test_reread_ignores_the_period(token: Path) -> None:
    """reread() (the answer to a 401) reads the file at once."""
    source = TokenFile(token, clock=Clock())
    replace(token, "second")
    assert source.reread() == "second"
    assert source.current() == "second"


def test_in_place_rewrite_is_seen(token: Path) -> None:
    """A file rewritten in place (same inode) with a token of another length is read again."""
    clock = Clock()
    source = TokenFile(token, clock=clock)
    token.write_text("a-longer-token\n")
    clock.now += CHECK_PERIOD
    assert source.current() == "a-longer-token"


@pytest.mark.parametrize("break_it", ["missing", "empty"])
def test_unreadable_file_keeps_the_last_token_and_warns_once(token: Path,
                                                             break_it: str) -> None:
    """Mid-rotation (file gone or empty) the last good token stays; one warning for the whole
    streak, and a note when the file is readable again."""
    clock = Clock()
    source = TokenFile(token, clock=clock)
    with structlog.testing.capture_logs() as logs:
        if break_it == "missing":
            token.unlink()
        else:
            token.write_text("")
        for _ in range(3):
            clock.now += CHECK_PERIOD
            assert source.current() == "first"
            assert source.reread() == "first"
        replace(token, "second")
        clock.now += CHECK_PERIOD
        assert source.current() == "second"
    assert [(e["log_level"], e["path"]) for e in logs] == [("warning", str(token)),
                                                          ("info", str(token))]
    assert all("first" not in str(e) and "second" not in str(e) for e in logs)


@pytest.mark.parametrize(("content", "error"), [(None, OSError), ("  \n", ValueError)],
                         ids=["missing", "blank"])
def test_unusable_file_at_start_is_an_error(tmp_path: Path, content: str | None,
                                            error: type[Exception]) -> None:
    """No token at start is an error for the caller to report, not an empty header."""
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)
    with pytest.raises(error):
        TokenFile(path)


def test_apply_sets_the_bearer_header_value(token: Path) -> None:
    """As a refresh hook it puts "Bearer <token>", trimmed, where the client library reads it."""
    configuration = Configuration()
    TokenFile(token).apply(configuration)
    assert configuration.api_key["BearerToken"] == "Bearer first"
