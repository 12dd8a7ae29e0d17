"""``autoscaler import-hpa FILE... [-o OUT]``: HPA manifests in, our TOML config out.

Reads multi-document YAML (or JSON) as ``kubectl get hpa -o yaml`` prints it, lists
included (``-`` reads stdin). Writes one ``[[autoscaler]]`` block per HPA, with a TODO
query and a comment wherever PromQL has to be written; ``autoscaler check`` rejects the
file until every TODO is filled in. Exit codes: 0 written, 1 unreadable or unsupported
input, 2 usage error.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from autoscaler.config.args import ArgParser
from autoscaler.config.hpa import Imported, ManifestError, hpa_documents, import_hpa
from autoscaler.config.toml_out import assignment, inline

_HEADER = """\
# Written by `autoscaler import-hpa` from {sources}.
# Fill in every query marked TODO, then run `autoscaler check` on this file.
# The [prometheus] table is not imported; without it the daemon asks http://localhost:9090:
# [prometheus]
# url = "http://prometheus.monitoring.svc:9090"
"""


def command(argv: Sequence[str]) -> int:
    parser = ArgParser(prog="autoscaler import-hpa",
                     description="Turn HorizontalPodAutoscaler manifests into a TOML config.")
    parser.add_argument("files", nargs="+", help="YAML or JSON manifests ('-' for stdin)")
    parser.add_argument("-o", "--output", help="write here instead of stdout")
    parser.add_argument("-n", "--namespace", default="default",
                        help="namespace for HPAs whose manifest names none (default: default)")
    args = parser.parse_args_or_exit(argv)
    if isinstance(args, int):
        return args
    try:
        text, notes = convert_files(args.files, default_namespace=args.namespace)
    except (OSError, yaml.YAMLError, ManifestError) as error:
        print(f"autoscaler import-hpa: {error}", file=sys.stderr)
        return 1
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def convert_files(files: Sequence[str], *, default_namespace: str) -> tuple[str, list[str]]:
    """The TOML for every HPA in ``files``, and notes for the user."""
    documents: list[Any] = []
    for file in files:
        text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        try:
            documents += list(yaml.safe_load_all(text))
        except yaml.YAMLError as error:
            raise yaml.YAMLError(f"{file}: invalid YAML: {error}") from None
    hpas, notes = hpa_documents(documents)
    if not hpas:
        raise ManifestError(f"no HorizontalPodAutoscaler found in {', '.join(files)}")
    imported = [import_hpa(hpa, default_namespace=default_namespace) for hpa in hpas]
    notes += [note for item in imported for note in item.notes]
    todos = sum(len(item.todos) for item in imported)
    if todos:
        notes.append(f"{todos} quer{'ies' if todos != 1 else 'y'} to write: search for TODO")
    return render(imported, sources=", ".join(files)), notes


def render(imported: Sequence[Imported], *, sources: str) -> str:
    blocks = [_HEADER.format(sources=sources)] + [_block(item) for item in imported]
    return "\n".join(blocks)


def _block(item: Imported) -> str:
    table = item.table
    lines = [f"# HorizontalPodAutoscaler {item.name} ({item.api_version})", "[[autoscaler]]"]
    for key in ("namespace", "scaleTargetRef", "minReplicas", "maxReplicas"):
        if key in table:
            lines += assignment(key, table[key])
    for direction, rules in table.get("behavior", {}).items():
        for key, value in rules.items():
            lines += assignment(f"behavior.{direction}.{key}", value)
    todos = {todo.metric_index: todo for todo in item.todos}
    for index, metric in enumerate(table["metrics"]):
        lines += ["", "[[autoscaler.metrics]]"]
        lines += _metric_lines(metric, todos[index].comment if index in todos else ())
    return "\n".join(lines) + "\n"


def _metric_lines(metric: dict[str, Any], comment: Sequence[str]) -> list[str]:
    lines = []
    for key, value in metric.items():
        if not isinstance(value, dict):
            lines += assignment(key, value)
            continue
        for inner, part in value.items():
            if inner == "query":
                lines += [f"# {line}" for line in comment]
            lines.append(f"{key}.{inner} = {inline(part)}")
    return lines
