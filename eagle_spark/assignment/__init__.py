"""EAGLE label assignment (paper Algorithm 2), the Baseline and the weightings between them.

Modules, each importing only those listed after it: ``assign`` (the stage, choosing under
``weighting=auto``), ``selection`` (the choice on held-out groups), ``output`` (one assignment's
output folder), ``refine`` (rounds of the classifier as scorer), ``members`` (who gets which
label), ``budget`` and ``posterior``.
"""
