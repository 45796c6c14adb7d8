"""How a value is written: in a scorecard cell (:func:`cell`, None empty), on a page (:func:`page`,
None "n/a", yes/no, lists) and in a reason a record keeps (:func:`plain`, None "None"); floats .3g."""

from __future__ import annotations

import sys


def text(value, none: str, yes_no: bool = False, lists: bool = False) -> str:
    """``value`` as text: None as ``none``; booleans yes/no where ``yes_no``; floats ``.3g``; lists and
    tuples element by element where ``lists``; anything else ``str``."""
    if value is None:
        return none
    if isinstance(value, bool):
        return ("yes" if value else "no") if yes_no else str(value)
    if isinstance(value, float):
        return f"{value:.3g}"
    if lists and isinstance(value, (list, tuple)):
        return "[" + ", ".join(text(v, none, yes_no, lists) for v in value) + "]"
    return str(value)


def cell(value) -> str:
    return text(value, none="")


def page(value) -> str:
    return text(value, none="n/a", yes_no=True, lists=True)


def plain(value) -> str:
    return text(value, none="None")


def margin(value) -> str:
    """A check's margin (section 11), signed: "+0.012", "-0.007"; None is empty."""
    return "" if value is None else ("+" if float(value) >= 0 else "") + cell(value)


def interval(check: dict) -> str:
    """A check's 95% sampling interval with its method, "[0.927, 0.956] wilson"; empty without one."""
    iv = check.get("interval")
    return "" if not iv else f"[{cell(iv[0])}, {cell(iv[1])}] {check.get('method', '')}".rstrip()


def md_cell(value) -> str:
    """Text for a markdown table cell: pipes escaped, on one line."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def get(rec, name, default=None):
    """A record's field, from a ClaimRecord or its dict."""
    return rec.get(name, default) if isinstance(rec, dict) else getattr(rec, name, default)


def entry_name(config) -> str:
    """A run's name (a :class:`rote.config.RunConfig`'s) in the run cache, its logs, progress files and timing
    records: here, below the run cache and the engine alike."""
    return run_name(config.task, config.key)


def run_name(task: str, key: str) -> str:
    """The name of the run of ``task`` with run key ``key`` (:func:`entry_name` of its configuration)."""
    return f"{task}-{key}"


def say(message: str) -> None:
    """A ``[rote]`` line on stderr."""
    print(f"[rote] {message}", file=sys.stderr, flush=True)
