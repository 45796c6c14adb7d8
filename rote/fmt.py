"""How a value is written in a table cell, a page or a reason: one function, three named variants.
They differ only where their readers differ: a missing value (None) is an empty cell in a scorecard
table (:func:`cell`), "n/a" on a page (:func:`page`, which also writes yes/no and lists), and "None"
in a reason stored in a record (:func:`plain`, whose text records keep). Floats take 3 significant
digits everywhere."""

from __future__ import annotations


def text(value, none: str, yes_no: bool = False, lists: bool = False) -> str:
    """``value`` as text: None as ``none``; booleans as yes/no where ``yes_no``, else True/False;
    floats as ``.3g``; lists and tuples element by element where ``lists``; anything else ``str``."""
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
    """A scorecard table cell: None is empty."""
    return text(value, none="")


def page(value) -> str:
    """A value on a page: None is "n/a", booleans yes/no, lists element by element."""
    return text(value, none="n/a", yes_no=True, lists=True)


def plain(value) -> str:
    """A value in a reason stored in a record: None is "None" (the stored text must not change)."""
    return text(value, none="None")


def margin(value) -> str:
    """A check's margin (section 11), signed: "+0.012", "-0.007"; None is empty."""
    return "" if value is None else ("+" if float(value) >= 0 else "") + cell(value)


def interval(check: dict) -> str:
    """A check's 95% sampling interval with its method, "[0.927, 0.956] wilson"; empty without one."""
    iv = check.get("interval")
    return "" if not iv else f"[{cell(iv[0])}, {cell(iv[1])}] {check.get('method', '')}".rstrip()
