"""The run stage: plan a run (resolve the metrics, check the fields, pre-flight), score it on an
engine (:mod:`.engines`: this process, a forked second process, or Ray), aggregate and store it
(:mod:`.runner`), and the per-sample result rows every output shows (:mod:`.rows`). Also the
cost estimate of a run before it starts (:mod:`.estimate`) and its provenance (:mod:`.provenance`).

``ragmeter.evaluate`` is :func:`ragmeter.run.runner.evaluate`.
"""
