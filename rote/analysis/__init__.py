"""Analyses of trained runs. Each function takes a model and examples and returns numbers: it never
trains, reads files or plots, and every hook it adds is removed before it returns.

Every forward pass that scores answers goes through :mod:`rote.scoring`; every intervention
(replace activations, then score) through :mod:`rote.analysis.patching`; hook names come from
:meth:`rote.model.HookedTransformer.hook_name`. One job per module:

- ``sets`` -- M (memorized noisy examples) and C (clean examples answered correctly);
- ``targets`` -- the intermediate results of each task, as labels and positions;
- ``lens`` -- the logit lens; ``probes`` -- linear probes per layer (C2);
- ``inlp`` -- the mathematics of iterative nullspace projection; ``erasure`` -- what C3 erases,
  where, and the fitted erasure;
- ``attribution`` -- attribution patching, circuits and their overlap (C3);
- ``patching`` -- setters, edits and the replace-then-score experiments of C3 and C4;
- ``neurons`` -- direct logit attribution, k50 and neuron specificity (C4); ``lookup`` -- known
  look-ups, the positive control of C4;
- ``fda_features`` -- FDA inputs and their Boolean features; ``units`` -- the units of C5 and the
  data over them (:class:`~rote.analysis.units.HeuristicMap`,
  :class:`~rote.analysis.units.NeighbourStats`); ``heuristics`` -- the classification of heuristic
  neurons; ``outliers`` -- clean-neighbour statistics (z) of memorized sums;
  ``neuron_patching`` -- neurons patched to their clean-neighbour expectations (C5).

Each name is imported from the module that defines it (no module passes on another's names), and no
two modules import each other (``tests/test_analysis_layout.py``).
"""
