"""``autoscaler status [TARGET]``: why each target is at N, from a running daemon's /status.

Without TARGET, a table as ``kubectl get hpa -A``; with TARGET, a page as ``kubectl describe
hpa`` plus what upstream cannot show (``views.page``); ``-o json|yaml`` prints the body as the
daemon serves it. The daemon is found at ``--url`` (e.g. ``kubectl port-forward``'s local
port), else where the daemon serves /status for the ``daemon.listenAddress`` of ``--config``
(the daemon's own rule, ``observability.addresses``: 127.0.0.1:8081 beside the in-cluster
0.0.0.0:8080), else for the default listen address, 127.0.0.1:8080. A TARGET
is a key (``namespace/Kind/name``) or any unambiguous end of one (``Kind/name``, ``name``); a
target the daemon does not have gets the closest names as suggestions.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from autoscaler.commands.conventions import CommandError, add_config, add_output

HELP = "show why each target is at its replica count (from a running daemon)"
DESCRIPTION = ("Show what a running daemon says about its targets: a table of all, or the "
               "page of one with its metrics, queries, pods and each stage of the last "
               "decision.")
DEFAULT_LISTEN = "127.0.0.1:8080"
"""``daemon.listenAddress``'s default (a test keeps the two equal)."""
TIMEOUT = 10.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", nargs="?", metavar="TARGET",
                        help="namespace/Kind/name, or an unambiguous end of it (web, "
                             "Deployment/web)")
    parser.add_argument("--url", metavar="URL",
                        help="the daemon's base URL, e.g. http://127.0.0.1:8081 through "
                             "kubectl port-forward (default: where the daemon serves /status "
                             "for the daemon.listenAddress of --config, else 127.0.0.1:8080)")
    add_config(parser, required=False, what="the daemon's config, to find its listen address")
    parser.add_argument("--timeout", type=float, default=TIMEOUT, metavar="SECONDS",
                        help=f"seconds to wait for the daemon (default: {TIMEOUT:g})")
    add_output(parser)


def run(args: argparse.Namespace) -> int:
    from autoscaler.commands.conventions import write_document
    from autoscaler.commands.views import now_utc, page, ring_summary, table
    from autoscaler.terminal import colour_wanted

    base = daemon_url(args)
    body = fetch(f"{base}/status", timeout=args.timeout)
    targets: dict[str, Any] = body.get("targets") or {}
    for key, target in targets.items():
        target.setdefault("target", key)
    if args.target is None:
        if args.output != "table":
            write_document(body, args.output)
        else:
            print(table(targets.values(), now=now_utc(), colour=colour_wanted(sys.stdout)))
            if isinstance(body.get("ring"), dict):
                print(f"\n{ring_summary(body['ring'])}")
        return 0
    key = resolve(args.target, list(targets))
    if args.output != "table":
        write_document(targets[key], args.output)
    else:
        print(page(targets[key], now=now_utc(), planned=bool(body.get("dryRun"))))
    return 0


def daemon_url(args: argparse.Namespace) -> str:
    if args.url:
        url: str = args.url
        return url.rstrip("/") if "://" in url else f"http://{url.rstrip('/')}"
    from autoscaler.observability.addresses import split_address, status_endpoint

    listen = DEFAULT_LISTEN
    if args.config is not None:
        from autoscaler.commands.conventions import load

        listen = load(args.config, check_files=False).daemon.listen_address
    host, port = split_address(status_endpoint(listen))
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def fetch(url: str, *, timeout: float) -> dict[str, Any]:
    """The daemon's JSON at ``url``, or a ``CommandError`` saying why not and what to check."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - http(s) only
            data = response.read()
    except urllib.error.HTTPError as error:
        raise CommandError(f"{url} answered HTTP {error.code}: is this the autoscaler's "
                           "listen address?") from None
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        why = getattr(error, "reason", error)
        why = getattr(why, "strerror", None) or why
        raise CommandError(f"cannot reach the daemon at {url}: {why}; is it running? Give its "
                           "address with --url (or --config), e.g. through kubectl "
                           "port-forward") from None
    try:
        body = json.loads(data)
    except ValueError:
        raise CommandError(f"{url} did not answer with JSON: is this the autoscaler's "
                           "listen address?") from None
    if not isinstance(body, dict):
        raise CommandError(f"{url} answered with something that is not the daemon's status")
    return body


def resolve(wanted: str, keys: Sequence[str]) -> str:
    """The key ``wanted`` names: itself, or the one key it is the end of."""
    if wanted in keys:
        return wanted
    ends = [key for key in keys if key.endswith("/" + wanted)]
    if len(ends) == 1:
        return ends[0]
    if ends:
        raise CommandError(f"{wanted!r} names several targets: {', '.join(sorted(ends))}")
    raise CommandError(f"the daemon has no target {wanted!r}{closest(wanted, keys)}")


def closest(wanted: str, keys: Sequence[str]) -> str:
    """``; did you mean A or B?`` from the keys and their names, or the count of targets."""
    names = {key.rpartition("/")[2]: key for key in keys}
    close = difflib.get_close_matches(wanted, keys, n=3, cutoff=0.6)
    close += [names[n] for n in difflib.get_close_matches(wanted.rpartition("/")[2], names,
                                                          n=3, cutoff=0.6)]
    close = list(dict.fromkeys(close))[:3]
    if close:
        return f"; did you mean {' or '.join(close)}?"
    return f" (it has {len(keys)} target{'s' if len(keys) != 1 else ''})"
