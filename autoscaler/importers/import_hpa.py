"""``autoscaler import-hpa FILE... [--out FILE] [--adapter-rules FILE]``: HPA manifests in,
our TOML config out (the arguments are parsed in ``autoscaler.commands.import_hpa``).

Reads multi-document YAML (or JSON) as ``kubectl get hpa -o yaml`` prints it, lists
included (``-`` reads stdin). Writes one ``[[autoscaler]]`` block per HPA, with a TODO
query and a comment wherever PromQL has to be written; ``autoscaler check`` rejects the
file until every TODO is filled in. With ``--adapter-rules``, prometheus-adapter's rules
write that PromQL where a rule serves the metric (``adapter_rules``). Exit codes: 0 written,
1 unreadable or unsupported input (or an output that cannot be written), 2 usage error.

The manifests come from someone else, so (with ``manifests`` and ``hpa``): each input is at
most 10 MiB of plain YAML without aliases, every name is one Kubernetes would accept, and
every string from a manifest is escaped wherever it lands (values, comments, PromQL
examples, messages). The output therefore parses to exactly one ``[[autoscaler]]`` table per
HPA and nothing else. Any problem is one line naming the file, line and field; ``-o`` is
replaced only once the whole output is ready, and atomically.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from autoscaler.importers.adapter_rules import AdapterRules
from autoscaler.importers.hpa import find_hpas, import_hpa
from autoscaler.importers.manifest_fields import ManifestError
from autoscaler.importers.manifests import (
    Document,
    InputError,
    plain,
    read_manifests,
    shown,
)
from autoscaler.importers.output import Imported, render
from autoscaler.importers.toml_out import comment

_HEADER = """\
# Fill in every query marked TODO, then run `autoscaler check` on this file.
# The [prometheus] table is not imported; without it the daemon asks http://localhost:9090:
# [prometheus]
# url = "http://prometheus.monitoring.svc:9090"
"""


def convert_files(files: Sequence[str], *, default_namespace: str,
                  rules: AdapterRules | None = None) -> tuple[str, list[str]]:
    """The TOML for every HPA in ``files``, and notes for the user; ``InputError`` if not."""
    imported: list[Imported] = []
    notes: list[str] = []
    for file in files:
        for document in read_manifests(file):
            more, skipped = _convert(document, default_namespace=default_namespace,
                                     rules=rules)
            imported += more
            notes += skipped
    if not imported:
        raise InputError(f"no HorizontalPodAutoscaler found in {', '.join(map(plain, files))}")
    notes += [note for item in imported for note in item.notes]
    todos = sum(len(item.todos) for item in imported)
    if todos:
        notes.append(f"{todos} quer{'ies' if todos != 1 else 'y'} to write: search for TODO")
    written_from = comment(f"Written by `autoscaler import-hpa` from "
                           f"{', '.join(map(plain, files))}.")
    return render(imported, header=f"{written_from}\n{_HEADER}"), notes


def _convert(document: Document, *, default_namespace: str,
             rules: AdapterRules | None) -> tuple[list[Imported], list[str]]:
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
            imported.append(import_hpa(hpa.manifest, default_namespace=default_namespace,
                                       resolve=None if rules is None else rules.resolve))
        except ManifestError as error:
            raise document.error((*hpa.loc, *error.loc), error.message) from None
    return imported, skipped
