"""The suite itself: a run without the corpus must not look like a full green run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _collect(tmp_path: Path, **environment: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    env.update(environment, HTM_CORPUS_DIR=str(tmp_path / "no-corpus-here"))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_bulk_and_corpus.py", "--collect-only",
         "-q", "-p", "no:cacheprovider"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_ci_without_the_corpus_fails_loudly(tmp_path: Path) -> None:
    result = _collect(tmp_path, CI="true")
    assert result.returncode != 0, result.stdout
    assert "CI is set and" in result.stdout + result.stderr
    assert "would be skipped" in result.stdout + result.stderr


def test_a_local_run_without_the_corpus_says_how_many_it_skips(tmp_path: Path) -> None:
    result = _collect(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "tests were skipped: the debian-memories corpus is missing" in result.stdout
