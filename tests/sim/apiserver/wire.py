"""How bodies go on the wire: compact JSON and a newline, as Go's json.Encoder writes them."""

from __future__ import annotations

import json
from typing import Any

JSON = "application/json"


def encode(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"
