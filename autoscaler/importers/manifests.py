"""Someone else's Kubernetes manifests: read within bounds, as plain data, checked by name.

``read_manifests(file)`` guarantees, whatever the file holds:

- at most ``MAX_INPUT_BYTES`` (10 MiB, about 10,000 HPAs as kubectl prints them) are read,
  from a regular file, a pipe (``<(kubectl get hpa -A -o yaml)``) or ``-`` (stdin); devices
  such as ``/dev/zero`` are refused, and a FIFO without a writer reads as empty at once;
- the text is UTF-8 (or UTF-16 with a byte-order mark, as YAML allows) and holds no control
  characters;
- YAML aliases (``*name``) are refused. ``kubectl get -o yaml`` never writes them (it prints
  JSON as YAML), and an alias is the only way a small file expands into a huge value (the
  "billion laughs"); without them the data is never larger than the text;
- nesting is at most ``MAX_NESTING`` deep (an HPA needs about 10), so nothing recurses far;
- values are what JSON holds (mappings with string keys, lists, strings, integers within
  int64, floats, booleans, null): a tag such as ``!!binary`` or ``!!set`` is refused, an
  unquoted date stays the text it is, a key given twice is refused (kubectl refuses it too);
- every problem is one ``InputError`` line naming the file and line.

The events come from PyYAML's libyaml parser and are assembled here rather than by its
composer and constructor: that is where aliases and depth are bounded, and it is five times
faster than ``yaml.safe_load`` (1.2 s against 6.3 s for 5.4 MiB of HPAs).

The module also holds Kubernetes' rules for the names the importer reads, with upstream's
wording, and ``shown``/``plain``: the only ways a manifest's string reaches a message or a
comment (one printable line, whatever it holds).
"""

from __future__ import annotations

import codecs
import os
import re
import stat
import sys
from dataclasses import dataclass
from typing import Any, BinaryIO

import yaml
from yaml.nodes import ScalarNode

from autoscaler.config.issues import Loc, format_loc
from autoscaler.importers.toml_out import string

MAX_INPUT_BYTES = 10 * 2**20
"""The most an importer reads from one input."""
MAX_NESTING = 64
"""How deep mappings and lists may nest; an HPA manifest needs about 10."""

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_YAML_TAG = "tag:yaml.org,2002:"
_SCALAR_TAGS = frozenset(_YAML_TAG + t for t in ("str", "int", "float", "bool", "null"))
_COLLECTION_TAGS = frozenset({_YAML_TAG + "map", _YAML_TAG + "seq"})
# What YAML calls printable (YAML 1.1, 5.1); anything else makes libyaml fail with a message
# that has no line, so it is caught first.
_NOT_YAML_TEXT = re.compile(
    "[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_INT64 = range(-(2**63), 2**63)


class InputError(ValueError):
    """An input that cannot be imported; the message is one line naming the file and line."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Document:
    """One YAML document of an input: its data and how to point at a field in it."""

    file: str
    index: int
    """1-based position in the file."""
    value: Any
    text: str

    def error(self, loc: Loc, message: str) -> InputError:
        """``FILE:LINE: document N, PATH: message`` for the field at ``loc``."""
        line = _line_of(self.text, self.index, loc)
        where = f"document {self.index}, {format_loc(loc)}" if loc else f"document {self.index}"
        return InputError(f"{plain(self.file)}:{line}: {where}: {message}")


def read_manifests(file: str) -> list[Document]:
    """The YAML (or JSON) documents of ``file`` (``-``: stdin); see the module for the bounds."""
    return parse_manifests(_decode(_read_bytes(file), file), file)


def parse_manifests(text: str, file: str) -> list[Document]:
    """The documents of YAML ``text`` already read (a ConfigMap's value), named ``file``.

    The same guarantees as ``read_manifests`` past reading: no aliases, bounded nesting,
    JSON's values only, every problem one ``InputError`` line.
    """
    if bad := _NOT_YAML_TEXT.search(text):
        line = text.count("\n", 0, bad.start()) + 1
        raise InputError(f"{plain(file)}:{line}: character U+{ord(bad[0]):04X} is not "
                         "allowed in YAML")
    return [Document(file=file, index=index, value=value, text=text)
            for index, value in enumerate(_documents(text, file), start=1)]


def _read_bytes(file: str) -> bytes:
    if file == "-":
        if sys.stdin is None:
            raise InputError("-: standard input is closed")
        return _bounded(sys.stdin.buffer, file)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; without one, it reads as empty.
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise InputError(f"{plain(file)}: {error.strerror or error}") from None
    try:
        status = os.fstat(fd)
        if stat.S_ISDIR(status.st_mode):
            raise InputError(f"{plain(file)}: is a directory")
        if not (stat.S_ISREG(status.st_mode) or stat.S_ISFIFO(status.st_mode)):
            raise InputError(f"{plain(file)}: not a regular file or a pipe")
        if status.st_size > MAX_INPUT_BYTES:
            raise _too_large(file)
        os.set_blocking(fd, True)  # a pipe (`<(kubectl get hpa -o yaml)`) is read to its end
        with os.fdopen(os.dup(fd), "rb") as stream:
            return _bounded(stream, file)
    finally:
        os.close(fd)


def _bounded(stream: BinaryIO, file: str) -> bytes:
    try:
        data = stream.read(MAX_INPUT_BYTES + 1)
    except OSError as error:
        raise InputError(f"{plain(file)}: {error.strerror or error}") from None
    if len(data) > MAX_INPUT_BYTES:
        raise _too_large(file)
    return data


def _too_large(file: str) -> InputError:
    return InputError(f"{plain(file)}: larger than {MAX_INPUT_BYTES // 2**20} MiB, the most "
                      "an import reads from one input: split it (one namespace at a time)")


def _decode(data: bytes, file: str) -> str:
    utf16 = data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
    try:
        text = data.decode("utf-16" if utf16 else "utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        encoding = "UTF-16" if utf16 else "UTF-8"
        raise InputError(f"{plain(file)}:{line}: not {encoding} text (byte "
                         f"{data[error.start]:#04x}); save it as UTF-8") from None
    return text


def _documents(text: str, file: str) -> list[Any]:
    loader = _Loader(text)
    try:
        return _assemble(loader, file)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = f":{mark.line + 1}" if mark else ""
        problem = error.problem or error.context or "invalid YAML"
        raise InputError(f"{plain(file)}{line}: invalid YAML: {plain(problem)}") from None
    except yaml.YAMLError as error:
        raise InputError(f"{plain(file)}: invalid YAML: {plain(str(error))}") from None
    finally:
        loader.dispose()


def _assemble(loader: Any, file: str) -> list[Any]:
    """The documents' values, built from parser events (no recursion, no aliases)."""
    documents: list[Any] = []
    # One frame per open collection: [container, key awaiting its value (mappings)].
    stack: list[list[Any]] = []
    while (event := loader.get_event()) is not None:
        if isinstance(event, yaml.AliasEvent):
            raise _at(file, event, "YAML aliases (*name) are not supported: kubectl never "
                                   "writes them; expand them first")
        if isinstance(event, yaml.CollectionStartEvent):
            if len(stack) >= MAX_NESTING:
                raise _at(file, event, f"nested deeper than {MAX_NESTING} levels")
            _check_tag(file, event, _COLLECTION_TAGS)
            if stack and _awaits_key(stack[-1]):
                raise _at(file, event, "a mapping key must be a string, not a collection")
            mapping = isinstance(event, yaml.MappingStartEvent)
            stack.append([{} if mapping else [], None])
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            value = stack.pop()[0]
        elif isinstance(event, yaml.ScalarEvent):
            if stack and _awaits_key(stack[-1]):
                _check_tag(file, event, _SCALAR_TAGS)
                stack[-1][1] = _key(file, event, stack[-1][0])
                continue
            value = _scalar(loader, file, event)
        else:  # stream and document boundaries
            continue
        if not stack:
            documents.append(value)
        elif isinstance(stack[-1][0], dict):
            stack[-1][0][stack[-1][1]] = value
            stack[-1][1] = None
        else:
            stack[-1][0].append(value)
    return documents


def _awaits_key(frame: list[Any]) -> bool:
    return isinstance(frame[0], dict) and frame[1] is None


def _key(file: str, event: Any, mapping: dict[str, Any]) -> str:
    # A key is its text, as kubectl's YAML-to-JSON conversion makes it (`1: x` is "1").
    key: str = event.value
    if key in mapping:
        raise _at(file, event, f"key {shown(key)} is given twice")
    return key


def _scalar(loader: Any, file: str, event: Any) -> Any:
    _check_tag(file, event, _SCALAR_TAGS)
    tag = event.tag if event.tag not in (None, "!") else loader.resolve(
        ScalarNode, event.value, event.implicit)
    if tag not in _SCALAR_TAGS - {_YAML_TAG + "str"}:
        # Strings, and the plain scalars YAML 1.1 would read as dates or merge keys: JSON
        # (and so Kubernetes) has no such types.
        if event.style == '"' and _SURROGATE.search(event.value):
            raise _at(file, event, "a string holds a lone surrogate (not Unicode text)")
        return event.value
    try:
        value = loader.yaml_constructors[tag](loader, ScalarNode(tag, event.value))
    except (ValueError, LookupError):  # `!!bool maybe`, `!!int ''`, more digits than int()'s
        short = tag.replace(_YAML_TAG, "!!")
        raise _at(file, event, f"{shown(event.value)} is not a valid {short}") from None
    if isinstance(value, int) and not isinstance(value, bool) and value not in _INT64:
        raise _at(file, event, f"{shown(event.value)} is beyond the 64-bit integers "
                               "Kubernetes holds")
    return value


def _check_tag(file: str, event: Any, allowed: frozenset[str]) -> None:
    if event.tag not in (None, "!") and event.tag not in allowed:
        short = event.tag.replace(_YAML_TAG, "!!")
        raise _at(file, event, f"tag {plain(short)} is not supported: a Kubernetes manifest "
                               "holds only JSON values")


def _at(file: str, event: Any, message: str) -> InputError:
    return InputError(f"{plain(file)}:{_line(event)}: {message}")


def _line(event: Any) -> int:
    return int(event.start_mark.line) + 1


def _text(event: Any) -> str:
    return str(event.value)


def _line_of(text: str, index: int, loc: Loc) -> int:
    """The line of the value at ``loc`` in document ``index`` (its first line if not found)."""
    loader = _Loader(text)
    document, first = 0, 0
    path: list[str | int] = []  # the steps into the open collections below the root
    frames: list[list[Any]] = []  # per open collection: [is a mapping, its next step]
    try:
        while (event := loader.get_event()) is not None:
            if isinstance(event, yaml.DocumentStartEvent):
                document, first = document + 1, _line(event)
            elif document != index:
                continue
            elif isinstance(event, yaml.CollectionEndEvent):
                frames.pop()
                del path[max(len(frames) - 1, 0):]
            elif isinstance(event, yaml.ScalarEvent | yaml.CollectionStartEvent):
                if frames and frames[-1][0] and frames[-1][1] is None:
                    frames[-1][1] = _text(event)  # a key: its value comes next
                    continue
                step = _next_step(frames)
                if (*path, *step) == tuple(loc):
                    return _line(event)
                if isinstance(event, yaml.CollectionStartEvent):
                    path += step
                    mapping = isinstance(event, yaml.MappingStartEvent)
                    frames.append([mapping, None if mapping else 0])
    except yaml.YAMLError:
        pass
    finally:
        loader.dispose()
    return first


def _next_step(frames: list[list[Any]]) -> list[str | int]:
    """The key or index of the value about to be read (none for a document's root)."""
    if not frames:
        return []
    mapping, step = frames[-1]
    frames[-1][1] = None if mapping else step + 1
    return [step]


# Kubernetes' rules for names, as upstream validates them (apimachinery's
# IsDNS1123Label, IsDNS1123Subdomain and IsValidPathSegmentName), with its wording.
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def dns_label_problem(name: str) -> str | None:
    """Why ``name`` is not a lowercase RFC 1123 label (a namespace, a container), or None."""
    if len(name) > 63:
        return f"must be no more than 63 characters, got {len(name)}"
    if not _DNS_LABEL.fullmatch(name):
        return ("must be a lowercase RFC 1123 label: lower case alphanumeric characters or "
                f"'-', starting and ending with an alphanumeric character, got {shown(name)}")
    return None


def dns_subdomain_problem(name: str) -> str | None:
    """Why ``name`` is not a lowercase RFC 1123 subdomain (an object's name), or None."""
    if len(name) > 253:
        return f"must be no more than 253 characters, got {len(name)}"
    if not _DNS_SUBDOMAIN.fullmatch(name):
        return ("must be a lowercase RFC 1123 subdomain: lower case alphanumeric characters, "
                "'-' or '.', starting and ending with an alphanumeric character, got "
                f"{shown(name)}")
    return None


def path_segment_problem(name: str) -> str | None:
    """Why ``name`` cannot be a path segment (a kind, a referenced name, a metric), or None."""
    if not name:
        return "must not be empty"
    if name in {".", ".."}:
        return f"may not be '{name}'"
    illegal = [f"'{part}'" for part in ("/", "%") if part in name]
    return f"may not contain {' or '.join(illegal)}, got {shown(name)}" if illegal else None


def shown(value: object, *, limit: int = 60) -> str:
    """A manifest's value in a message: strings quoted and escaped, cut after ``limit``."""
    if isinstance(value, str):
        return string(value[:limit]) + ("..." if len(value) > limit else "")
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "an array"
    return str(value)


def plain(text: str, *, limit: int = 120) -> str:
    """``text`` as it is when it is one printable line of sensible length, else ``shown``."""
    return text if text.isprintable() and 0 < len(text) <= limit else shown(text, limit=limit)
