"""Every judge metric module, imported: the judge family as the metric registry loads it.

Each module registers its metrics when it is imported. The registry imports this module when it
needs the whole family (``ragmeter metrics``, an unknown name), and a judge metric's own module
first when it resolves a name it knows the home of (``metrics.registry._NAME_HOME``): a run of
faithfulness, context_recall and answer_relevancy imports ``generation`` and ``contexts``, not
the fourteen modules of the family (about 25 ms of a fresh process before its first request).
"""

from ragmeter.metrics.judge import (  # noqa: F401 - registers
                                    contexts,
                                    correctness,
                                    dag,
                                    deepeval_agentic,
                                    deepeval_mcp,
                                    deepeval_metrics,
                                    deepeval_single,
                                    generation,
                                    geval,
                                    pairwise,
                                    ragas_metrics,
                                    ragas_more,
                                    relevance,
                                    trajectory,
)
