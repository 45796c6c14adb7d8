"""The code fingerprint in every run key (rote.config.code_fingerprint) reads the training sources as tokens, so
that a run trained on one Python is found on another (issue 44: ``ast.dump`` gained fields in Python 3.12, and
every key computed there differed from 3.11's)."""

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rote import config as config_module

ROOT = Path(__file__).resolve().parents[1]

PLANTED = textwrap.dedent('''\
    """A module docstring."""
    # a comment
    PROFILE_PARAMS = {"quick": 1}


    def f(x, name):
        """A function docstring."""
        y = x + 1  # trailing comment
        return f"{name}: {y:.3f} {f'{x}'!r}"
    ''')
# The pinned normalization: tokens one per line; the docstrings, the comments and the ignored PROFILE_PARAMS
# gone; statement ends, indents and dedents as marks; each f-string whole, as Python 3.11 tokenizes it.
PINNED = "\n".join(["def", "f", "(", "x", ",", "name", ")", ":", "\\n", "y", "=", "x", "+", "1", "\\n",
                    "return", "f\"{name}: {y:.3f} {f'{x}'!r}\"", "\\n", "\\b"])


def _normalized(source: str) -> str:
    import ast
    return config_module._normalized_source(source, ast.parse(source))


def test_the_normalization_of_a_planted_source_is_pinned():
    assert _normalized(PLANTED) == PINNED


def test_comments_docstrings_and_layout_do_not_count_but_code_does():
    reworded = PLANTED.replace("A function docstring.", "Other words.").replace("# a comment", "# another")
    relaid = PLANTED.replace("y = x + 1", "y = x + \\\n        1").replace("\n\n\ndef", "\ndef")
    assert _normalized(reworded) == _normalized(relaid) == PINNED
    assert _normalized(PLANTED.replace("x + 1", "x + 2")) != PINNED
    # indentation is meaning: the same tokens in another block are another program
    moved = "def g():\n    a = 1\n    b = 2\n"
    assert _normalized(moved) != _normalized("def g():\n    a = 1\nb = 2\n")


def _other_pythons() -> list[str]:
    """Interpreters of other minor versions from 3.11 on (pyenv's or on PATH) that actually run."""
    found = {}
    candidates = [shutil.which(f"python3.{m}") for m in range(11, 16)]
    candidates += [str(p) for m in range(11, 16) for p in Path.home().glob(f".pyenv/versions/3.{m}.*/bin/python3")]
    for exe in filter(None, candidates):
        try:
            version = subprocess.run([exe, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                                     text=True, timeout=30, check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        if version != str(sys.version_info[:2]):
            found.setdefault(version, exe)
    return sorted(found.values())


# rote.config needs only the standard library at import (and rote.noise, which needs nothing): any interpreter
# computes the fingerprint from the checkout, without the project's packages
_PRINT_FINGERPRINT = "import sys; sys.path.insert(0, sys.argv[1]); import rote.config as c; print(c._fingerprint())"


def test_the_fingerprint_is_the_same_on_every_python_found():
    others = _other_pythons()
    if not others:
        pytest.skip("no other Python version on this machine (pyenv or python3.N on PATH)")
    here = config_module._fingerprint()
    for exe in others:
        out = subprocess.run([exe, "-I", "-c", _PRINT_FINGERPRINT, str(ROOT)], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == here, f"{exe}: {out.stdout.strip()} != {here}"
