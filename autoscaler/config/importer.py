"""``autoscaler import-hpa FILE... [--out FILE]``: HPA manifests in, our TOML config out.

Reads multi-document YAML (or JSON) as ``kubectl get hpa -o yaml`` prints it, lists
included (``-`` reads stdin). Writes one ``[[autoscaler]]`` block per HPA, with a TODO
query and a comment wherever PromQL has to be written; ``autoscaler check`` rejects the
file until every TODO is filled in. Exit codes: 0 written, 1 unreadable or unsupported
input (or an output that cannot be written), 2 usage error.

The manifests come from someone else, so (with ``manifests`` and ``hpa``): each input is at
most 10 MiB of plain YAML without aliases, every name is one Kubernetes would accept, and
every string from a manifest is escaped wherever it lands (values, comments, PromQL
examples, messages). The output therefore parses to exactly one ``[[autoscaler]]`` table per
HPA and nothing else. Any problem is one line naming the file, line and field; ``--out`` is
replaced only once the whole output is ready, and atomically. The command's arguments are
parsed in ``autoscaler.commands.import_hpa``.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autoscaler.config.hpa import Imported, ManifestError, find_hpas, import_hpa
from autoscaler.config.manifests import (
    Document,
    InputError,
    plain,
    read_manifests,
    shown,
)
from autoscaler.config.toml_out import assignment, comment, inline, key

_HEADER = """\
# Fill in every query marked TODO, then run `autoscaler check` on this file.
# The [prometheus] table is not imported; without it the daemon asks http://localhost:9090:
# [prometheus]
# url = "http://prometheus.monitoring.svc:9090"
"""


def convert_files(files: Sequence[str], *, default_namespace: str) -> tuple[str, list[str]]:
    """The TOML for every HPA in ``files``, and notes for the user; ``InputError`` if not."""
    imported: list[Imported] = []
    notes: list[str] = []
    for file in files:
        for document in read_manifests(file):
            more, skipped = _convert(document, default_namespace=default_namespace)
            imported += more
            notes += skipped
    if not imported:
        raise InputError(f"no HorizontalPodAutoscaler found in {', '.join(map(plain, files))}")
    notes += [note for item in imported for note in item.notes]
    todos = sum(len(item.todos) for item in imported)
    if todos:
        notes.append(f"{todos} quer{'ies' if todos != 1 else 'y'} to write: search for TODO")
    return render(imported, sources=files), notes


def _convert(document: Document, *, default_namespace: str) -> tuple[list[Imported], list[str]]:
    """The HPAs of one document; a field that cannot be read is an ``InputError`` naming it."""
    if document.value is None:  # an empty document, such as after a trailing ---
        return [], []
    if not isinstance(document.value, Mapping):
        return [], [f"{plain(document.file)}: skipped document {document.index}: "
                    f"{shown(document.value, limit=20)} is not a Kubernetes object"]
    try:
        found, skipped = find_hpas(document.value)
    except ManifestError as error:
        raise document.error(error.loc, error.message) from None
    imported = []
    for hpa in found:
        try:
            imported.append(import_hpa(hpa.manifest, default_namespace=default_namespace))
        except ManifestError as error:
            raise document.error((*hpa.loc, *error.loc), error.message) from None
    return imported, skipped


def render(imported: Sequence[Imported], *, sources: Sequence[str]) -> str:
    written_from = comment(f"Written by `autoscaler import-hpa` from "
                           f"{', '.join(map(plain, sources))}.")
    blocks = [f"{written_from}\n{_HEADER}"] + [_block(item) for item in imported]
    return "\n".join(blocks)


def _block(item: Imported) -> str:
    table = item.table
    lines = [comment(f"HorizontalPodAutoscaler {item.name} ({item.api_version})"),
             "[[autoscaler]]"]
    for name in ("namespace", "scaleTargetRef", "minReplicas", "maxReplicas"):
        if name in table:
            lines += assignment(name, table[name])
    for direction, rules in table.get("behavior", {}).items():
        if not rules:  # an empty table means upstream's default rules, as in the manifest
            lines.append(f"behavior.{direction} = {{}}")
        for name, value in rules.items():
            lines += assignment(f"behavior.{direction}.{name}", value)
    todos = {todo.metric_index: todo for todo in item.todos}
    for index, metric in enumerate(table["metrics"]):
        lines += ["", "[[autoscaler.metrics]]"]
        lines += _metric_lines(metric, todos[index].comment if index in todos else ())
    return "\n".join(lines) + "\n"


def _metric_lines(metric: dict[str, Any], todo: Sequence[str]) -> list[str]:
    lines = []
    for name, value in metric.items():
        if not isinstance(value, dict) or not value:
            lines += assignment(key(name), value)
            continue
        for inner, part in value.items():
            if inner == "query":
                lines += [comment(line) for line in todo]
            lines.append(f"{key(name)}.{key(inner)} = {inline(part)}")
    return lines


def write_atomically(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` in one step, so a failed write leaves the old file.

    A path that is not a regular file (``/dev/null``, ``/dev/stdout``) is written in place:
    replacing it would replace the device.
    """
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    if target.exists() and not target.is_file():
        with target.open("wb") as stream:
            stream.write(text.encode("utf-8"))
        return
    mode = target.stat().st_mode & 0o777 if target.exists() else 0o666 & ~_umask()
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(text.encode("utf-8"))
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
