"""The dev tools the tests call (cffconvert, zizmor, actionlint), from their own venv ``.venv-tools``
(``make tools``, requirements-dev.txt). Where a tool is missing the test is skipped and says why,
or fails where the tools are required (CI: ``ROTE_REQUIRE_TOOLS=1``, as ``make test`` sets it)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOLS_BIN = ROOT / ".venv-tools" / "bin"


def tool(name: str) -> str:
    """The path of the dev tool ``name`` (``.venv-tools/bin`` first, then PATH); skip or fail without it."""
    for candidate in (TOOLS_BIN / name, shutil.which(name)):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    reason = f"{name} not found in {TOOLS_BIN} or on PATH (run `make tools`)"
    if os.environ.get("ROTE_REQUIRE_TOOLS") == "1":
        pytest.fail(f"dev tools required (ROTE_REQUIRE_TOOLS=1) but {reason}", pytrace=False)
    pytest.skip(reason)
