"""``autoscaler run``: start the daemon (``autoscaler.app``) and end it cleanly.

Failures a user can cause (a config that does not load, no usable kubeconfig, a listen
address in use, a state file that is not the daemon's, a store another daemon runs on) are
one line and exit 1 before anything starts. A backend that cannot be
reached at start is said once, clearly, and the daemon starts anyway: it retries in the
background, as it does whenever a backend goes away.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from autoscaler.commands.conventions import FILE, CommandError, UsageError, add_config

HELP = "run the daemon"
DESCRIPTION = ("Run the daemon: reconcile every target of the config each sync period, serve "
               "/healthz, /readyz, /metrics and /status, reload on SIGHUP or a changed file.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config(parser)
    parser.add_argument("--kubeconfig", type=kubeconfig, metavar="FILE",
                        help="overrides kubernetes.kubeconfig").complete = FILE  # type: ignore[attr-defined]
    parser.add_argument("--context", help="overrides kubernetes.context")
    parser.add_argument("--state-file", type=Path, metavar="FILE",
                        help="overrides daemon.stateFile").complete = FILE  # type: ignore[attr-defined]
    parser.add_argument("--listen", metavar="HOST:PORT", type=listen_address,
                        help="overrides daemon.listenAddress (off loopback, /status listens "
                             "apart on 127.0.0.1 at the next port)")
    parser.add_argument("--dry-run", action="store_true", help="decide and report, never write")
    parser.add_argument("--shard", type=int, metavar="I",
                        help="this replica's shard, from 0 (with --total-shards)")
    parser.add_argument("--total-shards", type=int, metavar="N",
                        help="the number of shards the targets are split into")


def listen_address(value: str) -> str:
    """``--listen``: what ``daemon.listenAddress`` accepts, else a usage error."""
    from autoscaler.config.fields import HostPort, problem_with

    if problem := problem_with(HostPort, value):
        raise argparse.ArgumentTypeError(problem)
    return value


def kubeconfig(value: str) -> Path:
    """``--kubeconfig``: a file ``kubernetes.kubeconfig`` would accept, else a usage error."""
    from autoscaler.config.files import unreadable

    for part in value.split(os.pathsep):  # the client's rule, as for $KUBECONFIG
        if part and (problem := unreadable(os.path.expanduser(part))):
            raise argparse.ArgumentTypeError(f"cannot read {part}: {problem}")
    return Path(value)


def run(args: argparse.Namespace) -> int:
    if (args.shard is None) != (args.total_shards is None):
        raise UsageError("--shard and --total-shards go together")
    if args.total_shards is not None and not 0 <= args.shard < args.total_shards:
        raise UsageError("--shard must be between 0 and --total-shards - 1")
    from autoscaler.app import THREAD_GRACE, Daemon, Overrides
    from autoscaler.config import ConfigError, load_config
    from autoscaler.errors import StateInUseError, StateNotOursError, StateUnavailableError
    from autoscaler.observability.logs import configure_logging

    try:
        config = load_config(args.config)
    except ConfigError as error:
        raise CommandError(f"invalid config, not starting:\n{error}") from None
    overrides = Overrides(
        kubeconfig=args.kubeconfig, context=args.context, state_file=args.state_file,
        dry_run=args.dry_run, listen=args.listen, shard=args.shard,
        total_shards=args.total_shards)
    config = overrides.apply(config)
    if args.total_shards is not None and config.daemon.sharding.mode == "dynamic":
        raise UsageError("--shard and --total-shards split the targets by hand; "
                         "daemon.sharding.mode = \"dynamic\" spreads them by itself: use one")
    _check_listen(config.daemon.listen_address)
    _check_state_file(config.daemon.state_file)
    configure_logging(log_format=config.daemon.log_format, level=config.daemon.log_level)
    asyncio.run(_say_unreachable(config))
    try:
        daemon = Daemon(config, config_path=args.config, overrides=overrides)
        code = 0
        with contextlib.suppress(KeyboardInterrupt):
            code = _run_loop(daemon.run())
    except (StateInUseError, StateNotOursError, StateUnavailableError) as error:
        raise CommandError(f"not starting: {error}") from None
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise CommandError(_in_use(config.daemon.listen_address)) from None
        raise
    _exit_without_stuck_threads(code, THREAD_GRACE)
    return code


def _in_use(address: str) -> str:
    return (f"cannot listen on {address}: the address is in use (another daemon?); set "
            "daemon.listenAddress or --listen to a free one")


def _check_listen(address: str) -> None:
    """Fail before connecting anywhere if the listen address cannot be bound."""
    from autoscaler.observability.addresses import split_address

    try:
        host, port = split_address(address)
    except ValueError as error:
        raise CommandError(str(error)) from None
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as error:
        raise CommandError(f"cannot listen on {address}: {error.strerror or error}") from None
    family, kind, proto, _, where = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(where)
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise CommandError(_in_use(address)) from None
            raise CommandError(f"cannot listen on {address}: {error.strerror}") from None


def _check_state_file(path: Path | None) -> None:
    """Refuse a state path that holds anything but a store of ours, wherever the path came
    from (the config's stateFile or --state-file); the file is only read."""
    from autoscaler.adapters.local_state import FileStateStore
    from autoscaler.errors import StateNotOursError, StateUnavailableError

    if path is None:
        return
    try:
        FileStateStore(path).check()
    except StateNotOursError as error:
        raise CommandError(f"not starting: {error}") from None
    except StateUnavailableError:
        pass  # an I/O error now: the daemon retries the read, writing nothing meanwhile


async def _say_unreachable(config: Any) -> None:
    """Name each backend that refuses connections now; the daemon keeps retrying them."""
    import structlog

    from autoscaler.commands.reach import problems

    log = structlog.get_logger("autoscaler.run")
    for problem in await problems(config, kube=True, prometheus=True):
        log.warning(f"{problem}; starting anyway and retrying in the background")


def _run_loop(main: Any) -> int:
    """``asyncio.run`` without its last step, which waits for every thread of the default
    executor with no time limit: a read stuck in a thread must not hold the exit."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return int(loop.run_until_complete(main))
    finally:
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        if tasks:
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        asyncio.set_event_loop(None)
        loop.close()


def _exit_without_stuck_threads(code: int, grace: float) -> None:
    """Exit now if worker threads are still blocked (a backend that never answers): the
    interpreter would otherwise wait for them at exit, past any stop timeout."""
    import structlog

    deadline = time.monotonic() + grace
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
    stuck = [t.name for t in threading.enumerate()
             if t is not threading.main_thread() and t.is_alive() and not t.daemon]
    if stuck:
        structlog.get_logger("autoscaler.run").warning(
            "exiting with worker threads still blocked on a backend", threads=stuck)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
