"""Human evaluation: annotation tasks over a run's samples, the labels raters give, and how far a
judge metric can be trusted against them (agreement statistics live in :mod:`ragmeter.stats.agreement`)."""

from ragmeter.human.tasks import (
    Scale,
    create_task,
    export_csv,
    human_labels,
    import_csv,
    labels_as_ratings,
    parse_scales,
    rater_by_token,
    save_label,
    task_status,
)

__all__ = [
    "Scale", "create_task", "export_csv", "human_labels", "import_csv", "labels_as_ratings",
    "parse_scales", "rater_by_token", "save_label", "task_status",
]
