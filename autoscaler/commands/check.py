"""``autoscaler check [CONFIG]``: validate a config without a cluster, and its queries.

Every problem of the file at once (``FILE:LINE: FIELD: message``), then every query parsed
as PromQL once its placeholders are filled in, then a summary of the targets. With
``--prometheus`` each query also runs once against its server, all at once, with a progress
line. Exit codes: 0 valid (warnings allowed, such as a query that matches nothing now, unless
``--strict``), 1 an invalid config, a query that does not parse or fails, or a server that
cannot be reached; 2 a usage error. Problems go to stderr, the summary to stdout; with
``-o json`` everything is one JSON document on stdout. ``--syntax-only`` skips the files the
config names (``caFile``, ``stateFile``, ...), as ``promtool check config --syntax-only``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import IO, Any

from autoscaler.commands.conventions import FILE, UsageError, add_config, add_output

HELP = "validate a config file (and its queries)"
DESCRIPTION = ("Validate a config file: every problem at once with its line and field, every "
               "query parsed as PromQL; with --prometheus, run each query once.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    positional = parser.add_argument("file", nargs="?", type=Path, metavar="CONFIG",
                                     help="the TOML config file (or give it with --config)")
    positional.complete = FILE  # type: ignore[attr-defined]
    add_config(parser, required=False, what="the TOML config file")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--prometheus", action="store_true",
                      help="also run every query once against its Prometheus server")
    mode.add_argument("--syntax-only", action="store_true",
                      help="do not check the files the config names (caFile, stateFile, ...)")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help="seconds per query (default: each server's timeout)")
    parser.add_argument("--strict", action="store_true",
                        help="fail on warnings too (a query that matches no series now)")
    add_output(parser, ("table", "json"))


def run(args: argparse.Namespace) -> int:
    from autoscaler.config import ConfigError, load_config

    path = _path(args)
    report = Report(path=path, json=args.output == "json")
    from autoscaler.commands.probe import query_issues

    try:
        config = load_config(path, check_files=not args.syntax_only)
    except ConfigError as error:
        # The queries are parsed from the file too: an invalid config hides none of them.
        issues = sorted([*error.issues, *query_issues(path)],
                        key=lambda i: (i.line is None, i.line or 0))
        return report.invalid(issues, complete=error.complete)
    issues = query_issues(path)
    if issues:
        return report.invalid(issues, complete=True)
    report.valid(config)
    if args.prometheus:
        _probe(config, args.timeout, report)
    return report.finish(strict=args.strict)


def _path(args: argparse.Namespace) -> Path:
    if args.file is not None and args.config is not None and args.file != args.config:
        raise UsageError("give the config once: as CONFIG or as --config, not both")
    path: Path | None = args.file or args.config
    if path is None:
        raise UsageError("the config file is required (CONFIG or --config FILE)")
    return path


def _probe(config: Any, timeout: float | None, report: Report) -> None:
    from autoscaler.commands.probe import run_probes

    total = sum(len(t.spec.metrics) for t in config.targets)
    servers = len({t.prometheus for t in config.targets})
    progress = Progress(sys.stderr, enabled=not report.json)
    progress.start(f"running the queries of {total} metric{'s' if total != 1 else ''} against "
                   f"{servers} Prometheus server{'s' if servers != 1 else ''}")
    results, server_problems = run_probes(config, timeout=timeout, progress=progress.update)
    progress.end()
    report.probed(results, server_problems)


class Progress:
    """One line on stderr: redrawn in place on a terminal, said once otherwise."""

    def __init__(self, stream: IO[str], *, enabled: bool) -> None:
        self.stream, self.enabled = stream, enabled
        self.tty = enabled and stream.isatty()
        self.what = ""

    def start(self, what: str) -> None:
        self.what = what
        if self.enabled:
            self.stream.write(f"{what}..." + ("" if self.tty else "\n"))
            self.stream.flush()

    def update(self, done: int, total: int) -> None:
        if self.tty:
            self.stream.write(f"\r{self.what}: {done}/{total} answered")
            self.stream.flush()

    def end(self) -> None:
        if self.tty:
            self.stream.write("\r\033[K")
            self.stream.flush()


class Report:
    """What ``check`` says, as text (problems on stderr, the rest on stdout) or one JSON
    document, and the exit code it comes to."""

    def __init__(self, *, path: Path, json: bool) -> None:
        self.path, self.json = path, json
        self.document: dict[str, Any] = {"config": str(path)}
        self.errors = self.warnings = 0

    def invalid(self, issues: list[Any], *, complete: bool) -> int:
        count = len(issues)
        summary = (f"{self.path}: invalid ({count}{'' if complete else ' or more'} problem"
                   f"{'s' if count != 1 else ''})")
        if self.json:
            self.document.update(valid=False, problems=[
                {"file": i.file, "line": i.line, "path": i.path, "message": i.message}
                for i in issues], complete=complete)
            _emit(self.document)
        else:
            for issue in issues:
                print(issue, file=sys.stderr)
            if not complete:
                print(f"{self.path}: stopped after {count} problems; fix these and check "
                      "again", file=sys.stderr)
            print(summary, file=sys.stderr)
        return 1

    def valid(self, config: Any) -> None:
        from autoscaler.commands.config_summary import summary, summary_json

        if self.json:
            self.document.update(valid=True, targets=summary_json(config))
        else:
            print(summary(config))

    def probed(self, results: list[Any], server_problems: list[Any]) -> None:
        """Each query has one fate (ok, a warning, failed, or not checked because its server
        cannot be reached), so the summary adds up: the fates sum to the queries."""
        from autoscaler.commands.probe import Verdict

        failed = sum(r.verdict is Verdict.ERROR for r in results)
        warned = sum(r.verdict is Verdict.WARNING for r in results)
        unchecked = sum(p.queries for p in server_problems if not p.ran)
        fates = {"queries": len(results) + unchecked, "ok": len(results) - failed - warned,
                 "failed": failed, "warnings": warned, "notChecked": unchecked}
        self.errors += failed + unchecked
        self.warnings += warned
        whole = {problem.server for problem in server_problems}
        if self.json:
            self.document["servers"] = [{"server": p.server, "problem": p.message,
                                         "queries": p.queries} for p in server_problems]
            self.document["queries"] = [r.to_json() for r in results
                                        if r.probe.server not in whole]
            self.document["summary"] = fates
            return
        for problem in server_problems:
            fate = "failed" if problem.ran else "not checked"
            print(f"error: {problem.message} ({_queries(problem.queries)} {fate})",
                  file=sys.stderr)
        for result in results:
            if result.probe.server in whole:
                continue
            probe = result.probe
            where = f"{probe.target} {probe.metric} [{probe.server}]"
            if result.verdict is Verdict.OK:
                print(f"ok    {where}: {result.series} series")
            else:
                label = "warn " if result.verdict is Verdict.WARNING else "FAIL "
                print(f"{label} {where}: {result.problem}\n      query: {probe.promql}")
        print(summary_line(fates))

    def finish(self, *, strict: bool) -> int:
        failed = self.errors > 0 or (strict and self.warnings > 0)
        if self.json:
            self.document.update(errors=self.errors, warnings=self.warnings, ok=not failed)
            _emit(self.document)
        return 1 if failed else 0


def summary_line(fates: dict[str, int]) -> str:
    """``5 queries: 2 ok, 1 failed, 1 with warnings, 1 not checked``: every query once."""
    text = (f"{_queries(fates['queries'])}: {fates['ok']} ok, {fates['failed']} failed, "
            f"{fates['warnings']} with warnings")
    if fates["notChecked"]:
        text += f", {fates['notChecked']} not checked"
    return text


def _queries(count: int) -> str:
    return f"{count} quer{'ies' if count != 1 else 'y'}"


def _emit(document: dict[str, Any]) -> None:
    from autoscaler.commands.conventions import write_document

    write_document(document, "json")
