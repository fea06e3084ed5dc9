"""What the grader writes into nbgrader's gradebook besides scores, shared by nbgrader's own
autograde (`nbgrader_steps`) and the batch command (`student`)."""

from collections.abc import Iterable
from typing import Any

__all__ = ["flag_in_gradebook"]


def flag_in_gradebook(gradebook: Any, assignment: str, student: str, flags: list[str],
                      notebooks: Iterable[str] | None = None) -> None:
    """Mark `student`'s submitted notebooks (only `notebooks` when given) as flagged, with
    `flags` (what a human should look at, in plain words) as the answer cells' comment,
    so that formgrader shows them; the scores stay as they are."""
    if not flags:
        return
    text = "residual-pack: for a human to look at: " + "; ".join(flags)
    submission = gradebook.find_submission(assignment, student)
    for notebook in submission.notebooks:
        if notebooks is not None and notebook.name not in notebooks:
            continue
        notebook.flagged = True
        for found in notebook.comments:
            kept = found.auto_comment or ""
            if text not in kept:
                found.auto_comment = ((kept + "\n") if kept else "") + text[:4000]
    gradebook.db.commit()
