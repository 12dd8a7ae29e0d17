"""The command line's conventions: --version, help for every option, completion generated
from the parser, colour only on a terminal and never with NO_COLOR."""

from __future__ import annotations

import argparse
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from autoscaler import CORE
from autoscaler.commands import COMMANDS, build_parser, main
from tests.commands.fake_http import serving

ROOT = Path(__file__).parents[2]
SCRIPT = Path(sys.executable).parent / "autoscaler"
STATUS = {"targets": {"default/Deployment/web": {
    "lastOutcome": "error", "conditions": [
        {"type": "AbleToScale", "status": "False", "reason": "FailedGetScale", "message": "x"}]}}}


def subcommands() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions
                  if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize("launcher", [[sys.executable, "-m", "autoscaler"], [str(SCRIPT)]],
                         ids=["python-m", "console-script"])
def test_version(launcher: list[str]) -> None:
    """--version prints the installed version and which build of the core runs, through both
    entry points."""
    done = subprocess.run([*launcher, "--version"], capture_output=True, text=True, timeout=30,
                          cwd=ROOT, check=False)
    core = "compiled (mypyc)" if CORE.compiled else "pure Python"
    assert (done.returncode, done.stdout) == (0, f"autoscaler 0.1.0 (core: {core})\n")


def test_every_option_has_help_without_markup() -> None:
    """Every option of every command says what it does, in plain text (no RST)."""
    assert set(subcommands()) == set(COMMANDS)
    for name, parser in subcommands().items():
        assert parser.description, name
        for action in parser._actions:
            assert action.help, f"{name} {action.option_strings or action.dest}"
            assert "``" not in action.help
            assert ":ref:" not in action.help


def test_every_command_reading_a_config_takes_config() -> None:
    """--config FILE means the same everywhere; -o is always the output format."""
    for name, parser in subcommands().items():
        options = {o: a for a in parser._actions for o in a.option_strings}
        if name not in {"import-hpa", "import-keda", "completion"}:  # they read no config
            assert options["--config"].metavar == "FILE", name
        if "-o" in options:
            assert options["-o"].dest == "output", name
            assert options["-o"].choices, name


def test_bash_completion_completes_commands_and_options(tmp_path: Path) -> None:
    """The generated bash script loads and completes a command's options from the parser."""
    script = subprocess.run([sys.executable, "-m", "autoscaler", "completion", "bash"],
                            capture_output=True, text=True, timeout=30, cwd=ROOT, check=True)
    (tmp_path / "complete.bash").write_text(script.stdout)
    probe = """
source "$1"
complete_words() { COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ));
  COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}; COMPREPLY=();
  _shtab_autoscaler; echo "${COMPREPLY[*]}"; }
complete_words autoscaler sta
complete_words autoscaler plan --ex
"""
    done = subprocess.run(["bash", "-c", probe, "probe", str(tmp_path / "complete.bash")],
                          capture_output=True, text=True, timeout=30, check=True)
    assert done.stdout.splitlines() == ["status", "--explain"]


def test_zsh_completion_is_generated(capsys: pytest.CaptureFixture[str]) -> None:
    """zsh gets a #compdef script naming every command."""
    assert main(["completion", "zsh"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("#compdef autoscaler")
    assert all(name in out for name in COMMANDS)


def run_on_terminal(argv: list[str], env: dict[str, str]) -> bytes:
    """``argv`` with stdout on a pseudo-terminal; what it wrote there."""
    leader, follower = pty.openpty()
    try:
        subprocess.run(argv, stdout=follower, stderr=subprocess.DEVNULL, cwd=ROOT, timeout=30,
                       env=env, check=False)
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(leader)


@pytest.mark.parametrize(("no_color", "tty", "coloured"), [
    ("", True, True), ("1", True, False), ("", False, False)],
    ids=["terminal", "terminal-NO_COLOR", "pipe"])
def test_colour_only_on_a_terminal_without_no_color(no_color: str, tty: bool,
                                                    coloured: bool) -> None:
    """A failing target's conditions are red on a terminal; never with NO_COLOR or a pipe."""
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    if no_color:
        env["NO_COLOR"] = no_color
    with serving(body=STATUS) as url:
        argv = [sys.executable, "-m", "autoscaler", "status", "--url", url]
        if tty:
            out = run_on_terminal(argv, env)
        else:
            out = subprocess.run(argv, capture_output=True, timeout=30, cwd=ROOT, env=env,
                                 check=False).stdout
    assert b"FailedGetScale" in out
    assert (b"\x1b[31m" in out) is coloured


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_every_document_renders_enums_by_their_value(output: str) -> None:
    """-o json and -o yaml of any command render the same plain data: the core's reasons
    (str enums: yaml refused them, "unexpected RepresenterError" from `plan -o yaml`) and any
    other enum by its value."""
    import enum
    import io
    import json

    import yaml

    from autoscaler.algorithm import ConditionType, Reason
    from autoscaler.commands.conventions import write_document

    class Plain(enum.Enum):
        ONE = 1

    document = {"conditions": [{"type": ConditionType.ABLE_TO_SCALE,
                                "reason": Reason.VALID_METRIC_FOUND}], "n": Plain.ONE}
    stream = io.StringIO()
    write_document(document, output, stream)
    loaded = json.loads(stream.getvalue()) if output == "json" else yaml.safe_load(
        stream.getvalue())
    assert loaded == {"conditions": [{"type": "AbleToScale", "reason": "ValidMetricFound"}],
                      "n": 1}
