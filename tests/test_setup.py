"""The README's two commands: CI runs the second as written, and the first works as written in
a fresh virtual environment for a user without root."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UNPRIVILEGED_USER = "nobody"


def _readme_commands() -> list[str]:
    """The shell commands of the README's "Two commands" section, in order."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", section, re.S)]


def test_ci_runs_exactly_the_readme_test_command() -> None:
    setup, tests = _readme_commands()
    assert "htm-analytics demo" in setup and "pytest" in tests
    for command in (setup, tests):
        # A stock Debian/Ubuntu refuses pip outside a virtual environment (PEP 668).
        assert command.startswith("python3 -m venv .venv && .venv/bin/pip install -e ")
    script = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = [line for line in script if line.strip() and not line.startswith("#")
                and not line.startswith(("set ", "cd "))]
    assert commands == [tests]
    assert os.access(ROOT / ".ci" / "run", os.X_OK)
    assert ".venv/" in (ROOT / ".gitignore").read_text().split()


def _unprivileged_runner() -> list[str] | None:
    """``runuser -u nobody --`` when this process may use it, else None."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    runuser = shutil.which("runuser")
    if runuser is None:
        return None
    try:
        import pwd

        pwd.getpwnam(UNPRIVILEGED_USER)
    except KeyError:
        return None
    return [runuser, "-u", UNPRIVILEGED_USER, "--"]


def _checkout_copy(target: Path) -> None:
    """The files git knows of (tracked, and new ones not ignored), as a fresh clone has them."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True, check=True)
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


@pytest.mark.slow
def test_readme_set_up_runs_as_written_for_a_user_without_root() -> None:
    runner = _unprivileged_runner()
    if runner is None:
        pytest.skip(f"needs root, runuser and a user {UNPRIVILEGED_USER!r} to run the README "
                    "as an ordinary user")
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to copy")
    setup, _ = _readme_commands()
    workdir = Path(tempfile.mkdtemp(prefix="htm-readme-"))
    try:
        home, checkout = workdir / "home", workdir / "htm_analytics"
        home.mkdir()
        checkout.mkdir()
        _checkout_copy(checkout)
        workdir.chmod(0o755)
        subprocess.run(["chown", "-R", UNPRIVILEGED_USER, str(workdir)], check=True)
        if subprocess.run([*runner, "test", "-w", str(checkout)]).returncode != 0:
            pytest.skip(f"{UNPRIVILEGED_USER} cannot reach {workdir} (a parent directory "
                        "is closed to other users)")
        # A new user's environment: no database chosen, no data directory of ours.
        environment = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home),
                       "LANG": "C.UTF-8", "TMPDIR": str(workdir),
                       "XDG_RUNTIME_DIR": str(workdir / "run")}
        environment.update({k: v for k, v in os.environ.items() if k.startswith("PIP_")})
        done = subprocess.run([*runner, "env", "-i", *(f"{k}={v}" for k, v in
                                                       environment.items()),
                               "bash", "-c", setup], cwd=checkout, capture_output=True,
                              text=True, timeout=1800)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert "report written to" in done.stdout
        assert (checkout / "report.html").read_text().startswith("<!DOCTYPE html>")
        data_dir = home / ".local" / "share" / "htm_analytics" / "postgres"
        assert (data_dir / "PG_VERSION").is_file()
        # The demo's server stopped with it: nothing left running.
        assert not (data_dir / "postmaster.pid").exists()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
