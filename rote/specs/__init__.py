"""One :class:`rote.spec.ClaimSpec` per claim, ``SPEC`` in ``rote/specs/<claim>.py``: adding a claim adds a
module here (:mod:`rote.spec` registers every one)."""

from .. import spec as _registry  # noqa: F401  (first: importing one spec module alone then registers them all)
