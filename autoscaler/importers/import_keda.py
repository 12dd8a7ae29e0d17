"""``autoscaler import-keda FILE... [--out FILE] [-n NAMESPACE]``: KEDA ScaledObjects in, TOML
out (the arguments are parsed in ``autoscaler.commands.import_keda``).

Reads multi-document YAML (or JSON) as ``kubectl get scaledobjects -o yaml`` prints it,
lists included (``-`` reads stdin), with the same bounds and escaping as ``import-hpa``.
Writes the Prometheus servers the triggers name (the most used one as ``[prometheus]``,
the others as ``[prometheus.servers.<host>]``), then one ``[[autoscaler]]`` block per
ScaledObject (``keda``). Whatever cannot be carried over is listed on stderr and beside its
target; secrets are TODOs. Exit codes: 0 written, 1 unreadable or unsupported input (or an
output that cannot be written), 2 usage error.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from autoscaler.importers.keda import find_scaled_objects, import_scaled_object
from autoscaler.importers.keda_cron import CronWindows
from autoscaler.importers.keda_metadata import Authentications, read_authentication
from autoscaler.importers.manifest_fields import ManifestError
from autoscaler.importers.manifests import (
    Document,
    InputError,
    plain,
    read_manifests,
    shown,
)
from autoscaler.importers.output import Imported, ServerTable, render
from autoscaler.importers.toml_out import comment

_HEADER = """\
# Fill in every TODO (queries, secrets), then run `autoscaler check` on this file.
# Read the "Not carried over" comments: what KEDA did there, this file does not do.
"""


Server = tuple[dict[str, Any], dict[str, tuple[str, ...]]]


def convert_files(files: Sequence[str], *, default_namespace: str) -> tuple[str, list[str]]:
    """The TOML for every ScaledObject in ``files``, and notes; ``InputError`` if none."""
    imported: list[tuple[Imported, Server | None]] = []
    notes: list[str] = []
    cron = CronWindows()
    documents = [document for file in files for document in read_manifests(file)]
    authentications = dict(found for document in documents
                           if (found := _authentication(document)) is not None)
    for document in documents:
        more, skipped = _convert(document, default_namespace=default_namespace, cron=cron,
                                 authentications=authentications)
        imported += more
        notes += skipped
    if not imported:
        raise InputError(f"no ScaledObject found in {', '.join(map(plain, files))}")
    servers = _name_servers([server for _, server in imported if server is not None])
    targets = []
    for item, server in imported:
        name = servers[_server_key(server)].name if server is not None else "default"
        if name != "default":
            item.table["prometheus"] = name
        targets.append(item)
        notes += item.notes
    todos = sum(len(item.todos) for item in targets)
    if todos:
        notes.append(f"{todos} quer{'ies' if todos != 1 else 'y'} to write: search for TODO")
    written_from = comment(f"Written by `autoscaler import-keda` from "
                           f"{', '.join(map(plain, files))}.")
    unique = list({id(server): server for server in servers.values()}.values())
    return render(targets, header=f"{written_from}\n{_HEADER}", servers=unique), notes


def _authentication(document: Document) -> tuple[str, dict[str, str]] | None:
    value = document.value
    if isinstance(value, Mapping) and value.get("kind") in (
            "TriggerAuthentication", "ClusterTriggerAuthentication"):
        return read_authentication(value)
    return None


def _convert(document: Document, *, default_namespace: str, cron: CronWindows,
             authentications: Authentications,
             ) -> tuple[list[tuple[Imported, Server | None]], list[str]]:
    """The ScaledObjects of one document; a field that cannot be read is an ``InputError``."""
    if document.value is None:
        return [], []
    if not isinstance(document.value, Mapping):
        return [], [f"{plain(document.file)}: skipped document {document.index}: "
                    f"{shown(document.value, limit=20)} is not a Kubernetes object"]
    try:
        found, skipped = find_scaled_objects(document.value)
    except ManifestError as error:
        raise document.error(error.loc, error.message) from None
    converted = []
    for loc, manifest in found:
        try:
            item, server, comments = import_scaled_object(
                manifest, default_namespace=default_namespace, cron=cron,
                authentications=authentications)
        except ManifestError as error:
            raise document.error((*loc, *error.loc), error.message) from None
        converted.append((item, None if server is None else (server, comments)))
    return converted, skipped


def _server_key(server: Server) -> str:
    return json.dumps(server, sort_keys=True)


def _name_servers(servers: list[Server]) -> dict[str, ServerTable]:
    """One table per distinct server: the most used is ``default``, the others by host."""
    counts = Counter(_server_key(server) for server in servers)
    originals = {_server_key(server): server for server in servers}
    named: dict[str, ServerTable] = {}
    taken = {"default"}
    for rank, (key, _) in enumerate(counts.most_common()):
        table, comments = originals[key]
        name = "default" if rank == 0 else _free_name(_host_name(table["url"]), taken)
        taken.add(name)
        named[key] = ServerTable(name=name, table=table,
                                 comments={k: tuple(v) for k, v in comments.items()})
    return named


def _host_name(url: Any) -> str:
    """A server name from the URL's host: ``prometheus.monitoring.svc`` -> ``prometheus``."""
    host = re.sub(r"^[a-z]+://", "", str(url)).split("/")[0].split(":")[0].split(".")[0]
    return re.sub(r"[^A-Za-z0-9_-]+", "-", host).strip("-")[:40] or "server"


def _free_name(name: str, taken: set[str]) -> str:
    if name not in taken:
        return name
    return next(f"{name}-{n}" for n in range(2, len(taken) + 3) if f"{name}-{n}" not in taken)
