"""The core install (what scripts/demo.sh sets up, without the test extra) can run a worker.

The test extra pulls in packages (pytest brings ``packaging``) that a dependency may import
without declaring: kombu 5.7's Redis transport did, and the demo's workers died at start while
every other test passed. So this installs the project alone into a fresh venv.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.e2e


def test_core_install_imports_what_a_worker_and_the_cli_import(tmp_path: Path) -> None:
    # A copy: building from the checkout would leave build/ in it.
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "build", "*.egg-info", "bench", "tests", "trawl-*out", "__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = str(venv / "bin" / "python")
    subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    str(src)], check=True, timeout=900, capture_output=True)
    code = ("import kombu.transport.redis, workers.app.tasks, workers.cli, workers.cluster.member, "
            "dedup.service, sandbox, examples.sqlite_pages, examples.path_filter; print('ok')")
    out = subprocess.run([py, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
