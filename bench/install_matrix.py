"""Every ordinary way to install the package, for real, offline, each timed.

    .venv/bin/python bench/install_matrix.py                      # ~5 minutes on 2 cores
    .venv/bin/python bench/install_matrix.py --only "pip install ." --json FILE

Each row starts from a fresh virtualenv (or a fresh pipx or uv tool home) and a copy of this
checkout's files (tracked and untracked, none ignored: what a clone has), with build isolation
on, and no network: pip, pipx, ``python -m build`` and uv take every package, the build's
setuptools and mypy included, from a wheelhouse of the locked packages (``--wheelhouse``;
scripts/test.sh fills .cache/wheelhouse from requirements/test.txt). Rows marked "no compiler"
run with no C compiler on the PATH. Then the installed ``autoscaler`` must run from outside
the copy: ``--version`` (which names the core the install runs) and ``check`` of a shipped
example config. It prints each row's time and which core it installed; tests/shipping/
test_install.py runs it and checks every row.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WHEELHOUSE = ROOT / ".cache" / "wheelhouse"
EXAMPLE = ROOT / "config" / "examples" / "minimal.toml"
COMPILERS = re.compile(r"^(cc|c\+\+|gcc|g\+\+|clang|clang\+\+|cpp|x86_64-linux-gnu-\S+|"
                       r"aarch64-linux-gnu-\S+|gcc-\d+|g\+\+-\d+|clang-\d+)$")
FALLBACK = "autoscaler: the compiled core could not be built"


@dataclass
class Row:
    name: str
    seconds: float = 0.0
    core: str = ""
    """What the installed ``autoscaler --version`` says of its core."""
    fallback_line: str = ""
    """The build's one line on a failed compile, if it printed one."""
    error: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass
class Workspace:
    """One row's throwaway directory, its environment and its copy of the checkout."""

    directory: Path
    environment: dict[str, str]
    source: Path

    def run(self, *command: str | Path, cwd: Path | None = None,
            extra: dict[str, str] | None = None, timeout: float = 600) -> str:
        done = subprocess.run([str(part) for part in command], cwd=cwd or self.source,
                              env={**self.environment, **(extra or {})}, text=True,
                              capture_output=True, timeout=timeout, check=False)
        output = done.stdout + done.stderr
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(map(str, command))} exited {done.returncode}:\n"
                               f"{output[-3000:]}")
        return output

    def venv(self, name: str = "venv") -> Path:
        path = self.directory / name
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120,
                       env=self.environment)
        return path / "bin"


def copy_checkout(target: Path) -> Path:
    """This checkout's files as a clone would have them (no .venv, build/ or out/)."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"],  # noqa: S607
                            cwd=ROOT, capture_output=True, check=True, timeout=60).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def without_compilers(directory: Path) -> str:
    """A PATH with every program of this one but the C compilers (symlinks in ``directory``)."""
    directory.mkdir()
    for entry in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(entry):
            continue
        for program in os.listdir(entry):
            link = directory / program
            if not COMPILERS.match(program) and not link.exists():
                link.symlink_to(Path(entry) / program)
    return str(directory)


def offline_environment(directory: Path, wheelhouse: Path, *, compiler: bool) -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("PIP_", "UV_", "PIPX_", "VIRTUAL_ENV", "PYTHON",
                                          "AUTOSCALER_"))}
    environment.update({
        "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheelhouse),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_CACHE_DIR": str(directory / "pip-cache"),
        "UV_CACHE_DIR": str(directory / "uv-cache"), "UV_OFFLINE": "1", "UV_NO_INDEX": "1",
        "UV_FIND_LINKS": str(wheelhouse), "UV_PYTHON_DOWNLOADS": "never",
        "UV_NO_CONFIG": "1", "HOME": str(directory / "home"),
    })
    if not compiler:
        environment["PATH"] = without_compilers(directory / "bin-without-compilers")
    return environment


def check_installed(workspace: Path, autoscaler: Path, environment: dict[str, str]) -> str:
    """Run the installed command from outside the checkout; its core, from ``--version``."""
    outside = workspace / "elsewhere"
    outside.mkdir(exist_ok=True)
    shutil.copy(EXAMPLE, outside / "config.toml")

    def run(*arguments: str) -> tuple[str, str]:
        done = subprocess.run([str(autoscaler), *arguments], cwd=outside, env=environment,
                              text=True, capture_output=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"autoscaler {' '.join(arguments)} exited {done.returncode}:\n"
                               f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
        return done.stdout, done.stderr

    version, complaint = run("--version")
    if complaint:  # e.g. compiled modules set aside as stale
        raise RuntimeError(f"autoscaler --version printed on stderr: {complaint[-2000:]}")
    run("check", "config.toml")
    found = re.search(r"\(core: (.*)\)", version)
    return found.group(1) if found else version.strip()


# --- the rows ----------------------------------------------------------------------------

def pip_install(w: Workspace, *flags: str, extra: dict[str, str] | None = None) -> tuple[Path, str]:
    bin_ = w.venv()
    output = w.run(bin_ / "pip", "install", "-v", *flags, ".", extra=extra)
    return bin_ / "autoscaler", output


def pip_wheel(w: Workspace) -> tuple[Path, str]:
    built = w.directory / "wheels"
    output = w.run(sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", built, ".")
    (wheel,) = built.glob("autoscaler-*.whl")
    if not wheel.name.endswith("-py3-none-any.whl"):
        raise RuntimeError(f"the default build's wheel is not pure: {wheel.name}")
    bin_ = w.venv()
    w.run(bin_ / "pip", "install", wheel)
    return bin_ / "autoscaler", output


def python_m_build(w: Workspace) -> tuple[Path, str]:
    """``python -m build``: the sdist, and the wheel built from it; then the sdist must build
    again, by pip, into a wheel that installs and runs."""
    dist = w.directory / "dist"
    output = w.run(sys.executable, "-m", "build", "--outdir", dist, ".")
    (sdist,) = dist.glob("autoscaler-*.tar.gz")
    (wheel,) = dist.glob("autoscaler-*.whl")
    again = w.directory / "again"
    output += w.run(sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", again, sdist)
    (rebuilt,) = again.glob("autoscaler-*.whl")
    if rebuilt.name != wheel.name:
        raise RuntimeError(f"the sdist built {rebuilt.name}, python -m build {wheel.name}")
    bin_ = w.venv()
    w.run(bin_ / "pip", "install", rebuilt)
    return bin_ / "autoscaler", output


def pipx_install(w: Workspace) -> tuple[Path, str]:
    homes = {"PIPX_HOME": str(w.directory / "pipx"), "PIPX_BIN_DIR": str(w.directory / "pipx-bin"),
             "PIPX_MAN_DIR": str(w.directory / "pipx-man")}
    w.environment.update(homes)
    output = w.run(Path(sys.executable).parent / "pipx", "install", "--verbose", ".")
    return Path(homes["PIPX_BIN_DIR"]) / "autoscaler", output


def uv_pip_install(w: Workspace) -> tuple[Path, str]:
    bin_ = w.venv()
    output = w.run(Path(sys.executable).parent / "uv", "pip", "install", "--python",
                   bin_ / "python", ".")
    return bin_ / "autoscaler", output


def uv_tool_install(w: Workspace) -> tuple[Path, str]:
    homes = {"UV_TOOL_DIR": str(w.directory / "uv-tools"),
             "UV_TOOL_BIN_DIR": str(w.directory / "uv-bin")}
    w.environment.update(homes)
    output = w.run(Path(sys.executable).parent / "uv", "tool", "install", "--python",
                   sys.executable, ".")
    return Path(homes["UV_TOOL_BIN_DIR"]) / "autoscaler", output


def compiled_pip_install(w: Workspace) -> tuple[Path, str]:
    return pip_install(w, extra={"AUTOSCALER_COMPILE": "1"})


def compiled_editable_then_pure(w: Workspace) -> tuple[Path, str]:
    """A compiled editable install (the extensions built in the checkout), then the same
    checkout installed again without compiling: that must remove them, not leave them to run
    (or to be set aside at every start)."""
    autoscaler, output = pip_install(w, "-e", extra={"AUTOSCALER_COMPILE": "1"})
    core = check_installed(w.directory, autoscaler, w.environment)
    if core != "compiled (mypyc)":
        raise RuntimeError(f"the compiled editable install runs the {core} core")
    output += w.run(autoscaler.parent / "pip", "install", "-v", "-e", ".")
    return autoscaler, output


def compile_with_a_type_error(w: Workspace) -> tuple[Path, str]:
    """The type check fails (a source mypy rejects): the build must still install."""
    module = w.source / "autoscaler" / "algorithm" / "quantity.py"
    module.write_text(module.read_text() + '\n_TYPE_ERROR: int = "not an int"\n')
    return pip_install(w, extra={"AUTOSCALER_COMPILE": "1"})


def compile_with_a_missing_header(w: Workspace) -> tuple[Path, str]:
    """The compiler finds no system header (as on a machine without the Python headers)."""
    return pip_install(w, extra={"AUTOSCALER_COMPILE": "1", "CC": "gcc -nostdinc"})


PURE, COMPILED = "pure Python", "compiled (mypyc)"


@dataclass(frozen=True)
class Spec:
    """How a row installs, and what it must give."""

    how: Callable[[Workspace], tuple[Path, str]]
    """Installs; returns the installed ``autoscaler`` and the build's output."""
    compiler: bool
    """A C compiler on the PATH."""
    core: str
    """The core the installed command must run."""
    falls_back: bool = False
    """Asked to compile and cannot: the build must say so in one line."""


ROWS: dict[str, Spec] = {
    "pip install .": Spec(pip_install, False, PURE),
    "pip install -e .": Spec(lambda w: pip_install(w, "-e"), False, PURE),
    "pip wheel .": Spec(pip_wheel, False, PURE),
    "python -m build": Spec(python_m_build, False, PURE),
    "pipx install .": Spec(pipx_install, False, PURE),
    "uv pip install .": Spec(uv_pip_install, False, PURE),
    "uv tool install .": Spec(uv_tool_install, False, PURE),
    "AUTOSCALER_COMPILE=1 pip install .": Spec(compiled_pip_install, True, COMPILED),
    "AUTOSCALER_COMPILE=1 pip install -e ., then pip install -e .": Spec(
        compiled_editable_then_pure, True, PURE),
    "AUTOSCALER_COMPILE=1 pip install . (no compiler)": Spec(
        compiled_pip_install, False, PURE, falls_back=True),
    "AUTOSCALER_COMPILE=1 pip install . (a type error)": Spec(
        compile_with_a_type_error, True, PURE, falls_back=True),
    "AUTOSCALER_COMPILE=1 pip install . (a missing header)": Spec(
        compile_with_a_missing_header, True, PURE, falls_back=True),
}



def run_row(name: str, wheelhouse: Path) -> Row:
    spec = ROWS[name]
    row = Row(name=name)
    with tempfile.TemporaryDirectory(prefix="install-") as scratch:
        directory = Path(scratch)
        environment = offline_environment(directory, wheelhouse, compiler=spec.compiler)
        (directory / "home").mkdir()
        workspace = Workspace(directory, environment, copy_checkout(directory / "autoscaler"))
        started = time.monotonic()
        try:
            autoscaler, output = spec.how(workspace)
            row.seconds = round(time.monotonic() - started, 1)
            row.fallback_line = next((line.strip() for line in output.splitlines()
                                      if FALLBACK in line), "")
            row.core = check_installed(directory, autoscaler, workspace.environment)
        except (RuntimeError, ValueError, subprocess.TimeoutExpired) as error:
            row.seconds = round(time.monotonic() - started, 1)
            row.error = str(error)
    return row


def main(arguments: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheelhouse", type=Path, default=WHEELHOUSE)
    parser.add_argument("--only", action="append", choices=list(ROWS), help="this row only")
    parser.add_argument("--json", type=Path, help="write the rows here too")
    options = parser.parse_args(arguments)
    if not any(options.wheelhouse.glob("setuptools-*.whl")):
        sys.exit(f"no wheelhouse at {options.wheelhouse}: run scripts/test.sh, or pip download "
                 "--require-hashes -r requirements/test.txt -d DIR and pass --wheelhouse DIR")
    rows = []
    for name in options.only or ROWS:
        row = run_row(name, options.wheelhouse)
        rows.append(row)
        status = f"FAILED: {row.error.splitlines()[0]}" if row.error else row.core
        print(f"{row.seconds:6.1f} s  {name:55}  {status}", flush=True)
        if row.fallback_line:
            print(f"{'':9} {row.fallback_line[:150]}", flush=True)
    if options.json:
        options.json.write_text(json.dumps([asdict(row) for row in rows], indent=1) + "\n")
    if any(row.error for row in rows):
        for row in rows:
            if row.error:
                print(f"\n--- {row.name}\n{row.error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
