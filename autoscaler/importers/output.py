"""What the importers write: one ``[[autoscaler]]`` block per imported object, and the file.

``Imported`` is a target table plus the words around it: TODO comments above queries to
write, comments above keys, commented-out lines for settings the config cannot hold yet,
and notes for the terminal. ``render`` turns imported objects (and the Prometheus server
tables ``import-keda`` finds) into one TOML text; every value goes through ``toml_out``, so
whatever a manifest held, the text parses to exactly these tables. ``write_out`` replaces
``--out`` only once the whole text is ready, and only if it is an importer's output (its
first line, ``WRITTEN_BY``) or nothing yet.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoscaler.config.files import replacing
from autoscaler.importers.toml_out import assignment, comment, inline, key, literal

TOP_LEVEL_ORDER = (
    "namespace", "scaleTargetRef", "minReplicas", "maxReplicas", "prometheus",
    "syncPeriodSeconds", "syncPeriod", "utilizationRequests", "paused", "pausedReplicas",
    "cooldownPeriod", "initialCooldownPeriod", "fallback", "schedules",
)
"""Target keys in the order a reader wants them; ``behavior`` and ``metrics`` come last."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Todo:
    """A query to write: the metric's path in the table and the comment to put above it."""

    metric_index: int
    comment: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Imported:
    """One imported object as a target table, plus what the user still has to do.

    ``comments`` holds lines put above a top-level key (by its name), at the top of the block
    (``""``), at the top of a metric (``"metrics[N]"``) or above a metric's query
    (``"metrics[N].query"``). ``tails`` holds lines put after the target's keys (``""``) or
    after a metric's (``"metrics[N]"``): settings the config cannot hold, commented out.
    Every line is one printable line (``manifests.plain``/``shown`` and ``toml_out`` make
    them so).
    """

    name: str
    source: str
    """What it was, for the block's first comment: ``HorizontalPodAutoscaler shop/web (v2)``."""
    table: dict[str, Any]
    todos: tuple[Todo, ...] = ()
    notes: tuple[str, ...] = ()
    comments: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    tails: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerTable:
    """A ``[prometheus]`` (name ``default``) or ``[prometheus.servers.NAME]`` table."""

    name: str
    table: dict[str, Any]
    comments: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def render(imported: Sequence[Imported], *, header: str,
           servers: Sequence[ServerTable] = ()) -> str:
    """The whole file: ``header`` (comment lines), the server tables, then one block each."""
    blocks = [header] + [_server(server) for server in servers]
    return "\n".join(blocks + [_block(item) for item in imported])


def _server(server: ServerTable) -> str:
    name = "prometheus" if server.name == "default" else f"prometheus.servers.{key(server.name)}"
    lines = [f"[{name}]"]
    for name_, value in server.table.items():
        lines += [comment(line) for line in server.comments.get(name_, ())]
        lines += assignment(key(name_), value)
    return "\n".join(lines) + "\n"


def _block(item: Imported) -> str:
    table, notes = item.table, item.comments
    lines = [comment(item.source), *(comment(line) for line in notes.get("", ())),
             "[[autoscaler]]"]
    known = [*TOP_LEVEL_ORDER, "behavior", "metrics"]
    for name in [*TOP_LEVEL_ORDER, *(k for k in table if k not in known)]:
        if name in table:
            lines += [comment(line) for line in notes.get(name, ())]
            lines += assignment(key(name), table[name])
    lines += [comment(line) for line in notes.get("behavior", ()) if "behavior" in table]
    for direction, rules in table.get("behavior", {}).items():
        if not rules:  # an empty table means upstream's default rules, as in the manifest
            lines.append(f"behavior.{direction} = {{}}")
        for name, value in rules.items():
            lines += assignment(f"behavior.{direction}.{key(name)}", value)
    lines += [comment(line) for line in item.tails.get("", ())]
    todos = {todo.metric_index: todo.comment for todo in item.todos}
    for index, metric in enumerate(table.get("metrics", ())):
        where = f"metrics[{index}]"
        lines += ["", "[[autoscaler.metrics]]", *(comment(line) for line in notes.get(where, ()))]
        above_query = (*todos.get(index, ()), *notes.get(f"{where}.query", ()))
        lines += _metric_lines(metric, above_query)
        lines += [comment(line) for line in item.tails.get(where, ())]
    return "\n".join(lines) + "\n"


def _metric_lines(metric: Mapping[str, Any], above_query: Sequence[str]) -> list[str]:
    lines = []
    for name, value in metric.items():
        if not isinstance(value, dict) or not value:
            lines += assignment(key(name), value)
            continue
        for inner, part in value.items():
            if inner == "query":
                lines += [comment(line) for line in above_query]
            written = literal(part) if inner == "query" and isinstance(part, str) else inline(part)
            lines.append(f"{key(name)}.{key(inner)} = {written}")
    return lines


def write_stdout(text: str) -> int:
    """Write ``text`` to stdout as UTF-8; 0, or 1 if the reader went away."""
    try:
        sys.stdout.buffer.write(text.encode("utf-8"))
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`| head`): say nothing, as cat does, and let exit be quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


WRITTEN_BY = "# Written by `autoscaler import-"
"""How every file an importer writes begins (``import-hpa`` or ``import-keda``)."""


def written_by_an_importer(head: bytes) -> bool:
    """Whether a file is an importer's output, which ``--out`` may replace."""
    return head.startswith(WRITTEN_BY.encode())


def write_out(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one step if it is nothing yet or an importer's
    output (``autoscaler.config.files.replacing``); a failed write leaves the old file."""
    with replacing(path, ours=written_by_an_importer, binary=True) as stream:
        stream.write(text.encode("utf-8"))
