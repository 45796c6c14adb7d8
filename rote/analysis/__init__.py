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
- ``patching`` -- setters and every replace-then-score experiment (C3, C4, C5);
- ``neurons`` -- direct logit attribution, k50 and neuron specificity (C4);
- ``fda_features`` -- FDA inputs and their Boolean features; ``heuristics`` -- heuristic neurons;
  ``outliers`` -- clean-neighbour statistics of memorized sums (C5).
"""
