"""The shared core every stage builds on: the data types (:mod:`.schema`), errors and their exit
codes (:mod:`.errors`), configuration files (:mod:`.config`), secret masking (:mod:`.redact`),
no-value reasons (:mod:`.reasons`), safe JSON (:mod:`.safejson`), file reading (:mod:`.files`),
the scoring context (:mod:`.context`), languages and text normalisation (:mod:`.language`,
:mod:`.text`), pass/fail thresholds (:mod:`.thresholds`) and the declared extension points
(:mod:`.hooks`).

Nothing here imports another ragmeter stage. The package itself imports nothing, so a command
that needs one of these modules pays only for that one.
"""
