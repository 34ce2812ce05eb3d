"""LLM-as-judge metrics. Each metric's prompt is a template in ``prompts/`` next to this code; its
algorithm is in its docstring; the judge's intermediate verdicts are stored in ``Score.details``.

Importing this package registers the metrics and imports no LLM SDK.
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
from ragmeter.metrics.judge._common import (
                                            DATA_NOTICE,
                                            JudgedMetric,
                                            PromptTemplate,
                                            fence_blocks,
                                            load_template,
                                            register_judged,
)
from ragmeter.metrics.judge.contexts import average_precision_of_verdicts
from ragmeter.metrics.judge.correctness import PRESETS, normalise_criteria

__all__ = ["DATA_NOTICE", "PRESETS", "JudgedMetric", "PromptTemplate", "average_precision_of_verdicts",
           "fence_blocks", "load_template", "normalise_criteria", "register_judged"]
