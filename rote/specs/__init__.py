"""One :class:`rote.spec.ClaimSpec` per claim, ``SPEC`` in ``rote/specs/<claim>.py``: adding a claim adds a
module here (:mod:`rote.spec` registers every one)."""

import importlib

importlib.import_module("..spec", __name__)  # the registry first: importing one spec module alone registers them all
