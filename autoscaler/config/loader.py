"""Read a TOML config, check all of it, and return a ``Config`` or raise every problem at once.

Each top-level table is validated on its own, so one bad table does not hide the others'
problems. A target is its ``[[autoscaler]]`` table merged over ``[defaults]`` (tables merge
key by key, arrays such as ``metrics`` are replaced whole); a problem in a value that came
from ``[defaults]`` is reported once, at its ``defaults.`` path. Nothing is returned unless
the whole file is valid, so a daemon reloading a broken file keeps its old config.

``ConfigError`` is the only exception that leaves ``load_config`` and ``parse_config``, so a
reload can rely on it: a file nested too deep for the parser, a number too long to convert
and even a bug of ours become one issue instead of a traceback. ``load_config`` reads the
file safely (``files.py``) and, unless told not to, checks the files it names.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import tomllib
from collections.abc import Collection, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from autoscaler.config.fields import show
from autoscaler.config.files import UnusableFileError, named_file_problems, read_config_file
from autoscaler.config.generation import table_generation
from autoscaler.config.issues import (
    MAX_ISSUES,
    ConfigError,
    ConfigIssue,
    Loc,
    Problem,
    Problems,
    format_loc,
)
from autoscaler.config.issues import did_you_mean as _hint
from autoscaler.config.locate import LineFinder
from autoscaler.config.schema import DaemonModel, KubernetesModel, PrometheusModel, TargetModel
from autoscaler.config.settings import daemon_settings, kubernetes_settings, prometheus_servers
from autoscaler.config.sharing import SharedParts
from autoscaler.config.targets import (
    SYNC_PERIOD_NAMES,
    check_metrics,
    check_sync_period_names,
    convert_target,
)
from autoscaler.config.translate import problems_from
from autoscaler.config.validated import DEFAULT_SERVER, Config, TargetConfig

M = TypeVar("M", bound=BaseModel)

SECTIONS = ("daemon", "prometheus", "kubernetes", "defaults", "autoscaler")
_TOML_POSITION = re.compile(r"\(at line (\d+), column \d+\)$")


def load_config(path: str | Path, *, check_files: bool = True,
                data: bytes | None = None) -> Config:
    """Load and check the file at ``path``; raises ``ConfigError`` listing every problem.

    ``check_files``: also check the files the config names (``caFile``, ``stateFile``, ...)
    on this machine; ``check --syntax-only`` turns it off. ``data``: the file's bytes as
    already read (what a watcher checked is what is loaded).
    """
    file = Path(path)
    if data is None:
        try:
            data = read_config_file(file)
        except UnusableFileError as problem:
            raise ConfigError([_file_issue(str(file), f"cannot read the config: {problem}")]
                              ) from None
    return _load(data, source=str(file), path=file, check_files=check_files)


def parse_config(
    data: bytes | str, *, source: str = "<string>", check_files: bool = False
) -> Config:
    """Check a config given as text; ``source`` names it in messages."""
    return _load(data, source=source, path=None, check_files=check_files)


def _load(data: bytes | str, *, source: str, path: Path | None, check_files: bool) -> Config:
    try:
        return _load_text(_decode(data, source), source=source, path=path,
                          check_files=check_files)
    except ConfigError:
        raise
    except RecursionError:
        message = "invalid TOML: arrays or tables nested too deeply"
    except MemoryError:
        message = "not enough memory to check the config"
    except Exception as error:  # a bug of ours: still one line, and the reload survives it
        message = f"internal error while checking the config: {type(error).__name__}: {error}"
        raise ConfigError([_file_issue(source, message)]) from error
    raise ConfigError([_file_issue(source, message)]) from None


def _load_text(text: str, *, source: str, path: Path | None, check_files: bool) -> Config:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError([_syntax_issue(error, source)]) from None
    except ValueError as error:  # int() refuses a literal longer than its limit
        limit = sys.get_int_max_str_digits()
        message = f"an integer has more than {limit} digits" if "digits" in str(error) else error
        raise ConfigError([_file_issue(source, f"invalid TOML: {message}")]) from None
    problems = Problems()
    config = _build(document, problems, path)
    if check_files:
        for problem in named_file_problems(document):
            problems.add(problem.loc, problem.message)
    if problems or config is None:
        issues = _issues(problems, text, source, document)
        raise ConfigError(issues[:MAX_ISSUES], complete=len(issues) <= MAX_ISSUES)
    return config


def _file_issue(source: str, message: str) -> ConfigIssue:
    return ConfigIssue(file=source, line=None, path="", message=message)


def _decode(data: bytes | str, source: str) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - data.rfind(b"\n", 0, error.start)
        raise ConfigError([ConfigIssue(
            file=source, line=line, path="",
            message=f"not UTF-8 text: byte {data[error.start]:#04x} at column {column}",
        )]) from None


def _syntax_issue(error: tomllib.TOMLDecodeError, source: str) -> ConfigIssue:
    message = str(error)
    match = _TOML_POSITION.search(message)
    line = int(match[1]) if match else None
    return ConfigIssue(file=source, line=line, path="", message=f"invalid TOML: {message}")


def _issues(
    problems: Problems, text: str, source: str, document: dict[str, Any]
) -> list[ConfigIssue]:
    finder = LineFinder(text, parsed=document)
    issues = [
        ConfigIssue(file=source, line=finder.line_of(p.loc), path=format_loc(p.loc),
                    message=p.message)
        for p in problems.items
    ]
    return sorted(issues, key=lambda i: (i.line is None, i.line or 0))


def _build(document: dict[str, Any], problems: Problems, path: Path | None) -> Config | None:
    for key in document.keys() - set(SECTIONS):
        problems.add((key,), f"unknown table{_hint(key, SECTIONS)}")
    daemon = daemon_settings(_validate(DaemonModel, document.get("daemon"), ("daemon",),
                                       problems), problems)
    servers = prometheus_servers(_validate(PrometheusModel, document.get("prometheus"),
                                           ("prometheus",), problems), problems)
    kubernetes = kubernetes_settings(_validate(KubernetesModel, document.get("kubernetes"),
                                               ("kubernetes",), problems), problems)
    targets = _targets(document, problems, servers=servers.keys(), sync_period=daemon.sync_period)
    if problems:
        return None
    return Config(
        source=path, daemon=daemon, prometheus=servers[DEFAULT_SERVER],
        prometheus_servers=MappingProxyType(servers), kubernetes=kubernetes,
        targets=tuple(targets),
    )


def _validate(model: type[M], value: object, loc: Loc, problems: Problems) -> M | None:
    try:
        return model.model_validate({} if value is None else value)
    except ValidationError as error:
        for problem in problems_from(error, model, prefix=loc):
            problems.add(problem.loc, problem.message)
        return None


def _targets(
    document: dict[str, Any], problems: Problems, *, servers: Collection[str],
    sync_period: float,
) -> list[TargetConfig]:
    defaults = _table(document.get("defaults", {}), ("defaults",), problems)
    if "scaleTargetRef" in defaults:
        problems.add(("defaults", "scaleTargetRef"), "set scaleTargetRef in each target")
    _validate(TargetModel, defaults, ("defaults",), problems)
    check_sync_period_names(defaults, loc=("defaults",), problems=problems)
    raw_targets = document.get("autoscaler", [])
    if not isinstance(raw_targets, list):
        problems.add(("autoscaler",), f"must be an array of tables ([[autoscaler]]), "
                     f"got {show(raw_targets)}")
        return []
    found: list[TargetConfig] = []
    shared = SharedParts()
    seen: dict[str, int] = {}
    for index, raw in enumerate(raw_targets):
        if len(problems.items) >= MAX_ISSUES:
            break  # enough to act on: the rest of a file broken everywhere costs only time
        loc = ("autoscaler", index)
        if not isinstance(raw, dict):
            problems.add(loc, f"must be a table, got {show(raw)}")
            continue
        target = _target(raw, defaults, loc, problems, servers=servers, sync_period=sync_period)
        if target is None:
            continue
        if target.key in seen:
            problems.add((*loc, "scaleTargetRef"), f"duplicate target {target.key}: "
                         f"autoscaler[{seen[target.key]}] already scales it")
        seen.setdefault(target.key, index)
        found.append(shared.target(target))
    return found


def _target(
    raw: dict[str, Any], defaults: dict[str, Any], loc: Loc, problems: Problems, *,
    servers: Collection[str], sync_period: float,
) -> TargetConfig | None:
    before = len(problems.items)
    check_sync_period_names(raw, loc=loc, problems=problems)
    if any(name in raw for name in SYNC_PERIOD_NAMES):
        # The target's own period, by either name, replaces the default's by either name.
        defaults = {k: v for k, v in defaults.items() if k not in SYNC_PERIOD_NAMES}
    model, dropped = _merged_target(raw, defaults, loc, problems)
    target = None if model is None else convert_target(
        model, loc=loc, servers=servers, dropped=dropped, sync_period=sync_period,
        problems=problems)
    if target is not None:
        target = dataclasses.replace(target, generation=table_generation(merge(defaults, raw)))
    if "metrics" in dropped:
        check_metrics(merge(defaults, raw).get("metrics"), loc=loc, problems=problems)
    _blame_defaults(problems, before, raw, defaults, loc)
    return target


def _blame_defaults(
    problems: Problems, start: int, raw: dict[str, Any], defaults: dict[str, Any], loc: Loc
) -> None:
    """Move problems inside metrics or behavior that came from [defaults] to their defaults path.

    Those tables are self-contained, so a problem in one is the default's own, reported
    once at the line that has it (cross-field problems such as bounds stay per target).
    """
    moved = []
    for problem in problems.take_from(start):
        inner = problem.loc[len(loc):]
        own = problem.loc[:len(loc)] == loc and inner[:1] in {("metrics",), ("behavior",)}
        if own and not _has(raw, inner) and _has(defaults, inner):
            moved.append(Problem(loc=("defaults", *inner), message=problem.message))
        else:
            moved.append(problem)
    for problem in moved:
        problems.add(problem.loc, problem.message)


def _table(value: object, loc: Loc, problems: Problems) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    problems.add(loc, f"must be a table, got {show(value)}")
    return {}


def _merged_target(
    raw: dict[str, Any], defaults: dict[str, Any], loc: Loc, problems: Problems
) -> tuple[TargetModel | None, frozenset[str]]:
    """The target merged over the defaults, and the top-level keys dropped as invalid.

    A field that fails validation is reported, then dropped so the rest of the target
    still gets its cross-field checks (all problems at once, not one round per fix).
    """
    merged = merge(defaults, raw)
    dropped: set[str] = set()
    for _ in range(2):
        try:
            return TargetModel.model_validate(merged), frozenset(dropped)
        except ValidationError as error:
            for problem in problems_from(error, TargetModel):
                from_defaults = not _has(raw, problem.loc) and _has(defaults, problem.loc)
                where = ("defaults",) if from_defaults else loc
                problems.add(where + problem.loc, problem.message)
                if problem.loc and isinstance(problem.loc[0], str):
                    dropped.add(problem.loc[0])
                    merged.pop(problem.loc[0], None)
    return None, frozenset(dropped)


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` over ``base``: tables merge key by key, anything else is replaced."""
    merged = dict(base)
    for key, value in override.items():
        below = merged.get(key)
        if isinstance(value, dict) and isinstance(below, dict):
            merged[key] = merge(below, value)
        else:
            merged[key] = value
    return merged


def _has(document: Any, loc: Loc) -> bool:
    current = document
    for part in loc:
        in_list = isinstance(part, int) and isinstance(current, list) and part < len(current)
        if in_list or (isinstance(current, dict) and part in current):
            current = current[part]
        else:
            return False
    return True
