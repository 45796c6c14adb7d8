"""C4's typed inputs from flat dicts of made-up numbers (the record's names): the summary on M, the
look-up's statistics and the chapter's setting, for :func:`rote.verdicts.c4.checks`."""

from dataclasses import fields

from rote.analysis.lookup import LookupStatistics
from rote.analysis.neurons import C4Summary
from rote.verdicts.c4 import Setting

SUMMARY = {f.name for f in fields(C4Summary)}


def c4_inputs(values: dict, lookup: dict | None = None):
    """(summary, lookup statistics, setting): ``values`` holds the summary's numbers and the setting's,
    ``lookup`` the look-up's numbers, ``n_lookup`` and ``tables`` (None or empty: not measured)."""
    summary = C4Summary(**{k: v for k, v in values.items() if k in SUMMARY})
    setting = Setting(**{k: v for k, v in values.items() if k not in SUMMARY})
    if not lookup:
        return summary, None, setting
    on = C4Summary(**{k: v for k, v in lookup.items() if k in SUMMARY})
    return summary, LookupStatistics(on, lookup.get("n_lookup"), lookup.get("tables", {})), setting


def c4_checks(values: dict, lookup: dict | None = None):
    from rote import verdicts

    return verdicts.c4.checks(*c4_inputs(values, lookup))
