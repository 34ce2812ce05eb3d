"""The agent side of ragmeter as small pure modules: expectations and presets (:mod:`.config`),
value lookup in a sample (:mod:`.lookup`), the formulas (:mod:`.formulas`), trajectory matching
(:mod:`.matching`) and execution statistics (:mod:`.stats`). The metrics that use them are in
:mod:`ragmeter.metrics.agent`; traces are read by :mod:`ragmeter.io.traces`.
"""
