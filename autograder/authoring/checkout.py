"""Where the pack's own code lives, and the commands that rewrite it.

Installed from a wheel, the pack's packages sit in site-packages and the course is any
folder with `nbgrader_config.py` and `source/`: grading, generating and releasing read
the course from there. A few authoring commands instead rewrite files of the pack itself
(`residual-pack stored` the stored numbers under `autograder/kernel/`, `residual-pack
fingerprints` its fingerprint table), to be committed with the code: they belong in a git
checkout of the pack installed editable (`pip install -e .`), and say so elsewhere rather
than write into site-packages.
"""

from pathlib import Path

from autograder.grading.course import CourseError

__all__ = ["pack_root", "pack_checkout", "require_checkout"]


def pack_root() -> Path:
    """The folder that holds the pack's packages as this Python imports them: the checkout
    under an editable install, site-packages under an installed wheel."""
    import autograder

    return Path(autograder.__file__).resolve().parent.parent


def pack_checkout() -> Path | None:
    """The checkout this Python imports the pack from, or None when it is installed (a
    wheel in site-packages)."""
    root = pack_root()
    if (root / "pyproject.toml").is_file() and (root / "autograder" / "kernel").is_dir():
        return root
    return None


def require_checkout(command: str, reason: str) -> Path:
    """The pack's checkout, for `command` (which needs it for `reason`: "it rewrites
    ..."); a CourseError saying where to run it when the pack is installed from a wheel."""
    root = pack_checkout()
    if root is None:
        raise CourseError(
            f"`residual-pack {command}` works on the pack's own files ({reason}): run it in a "
            f"git checkout of the pack with the pack installed editable from it (there: "
            f"`python3 -m venv .venv && .venv/bin/pip install -e .`, then "
            f"`.venv/bin/residual-pack {command}`), not with this installed copy "
            f"({pack_root() / 'autograder'})")
    return root
