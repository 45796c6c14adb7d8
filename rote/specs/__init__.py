"""One :class:`rote.spec.ClaimSpec` per claim, ``SPEC`` in ``rote/specs/<claim>.py``: adding a claim adds a
module here (:func:`rote.spec.register` reads every one)."""
