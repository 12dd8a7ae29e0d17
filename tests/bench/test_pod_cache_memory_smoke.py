"""bench/pod_cache_memory.py at small N, so it cannot rot (the bytes a pod are the bench's
figure; the test asks only that some were kept, for every pod)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.smoke import run_bench


@pytest.mark.timeout(60)
def test_smoke_run_caches_every_pod(tmp_path: Path) -> None:
    figures, printed = run_bench("pod_cache_memory.py", tmp_path / "figures.json",
                                 "--pods=500", timeout=50)
    assert figures["pods"] == 500
    assert figures["bytesPerPod"] > 100
    assert "500 pods cached" in printed
