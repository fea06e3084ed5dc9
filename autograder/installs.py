"""The install line the pack prints when something is missing (an extra, PyTorch, a
build backend), one that works as printed: it names the Python running the pack in full
(a bare `pip` is often another environment's, or refused by PEP 668), it comes last in
its message (so it is copied whole), and where this account may not write to the
environment (a shared one under /opt, say) it says who may.
`tests/unit/test_install_lines.py` runs each printed line as printed.

This module imports only the standard library: the student's wheel carries it.
"""

import os
import shlex
import sys
import sysconfig

__all__ = ["pip_install", "install_it_with", "who_may"]


def pip_install(*arguments: str) -> str:
    """`PYTHON -m pip install ARGUMENTS...`, quoted for a POSIX shell."""
    return " ".join([shlex.quote(sys.executable), "-m", "pip", "install",
                     *(shlex.quote(a) for a in arguments)])


def who_may() -> str:
    """"" where this account may write to the environment, else ", as root or as the
    environment's owner (this account may not write to it),": what goes before "with"."""
    if os.access(sysconfig.get_path("purelib"), os.W_OK):
        return ""
    return ", as root or as the environment's owner (this account may not write to it),"


def install_it_with(*arguments: str, what: str = "it") -> str:
    """"install it with: LINE", or, where this account cannot write to the environment,
    "install it, as root or as the environment's owner, with: LINE" (`what`: "them")."""
    return f"install {what}{who_may()} with: {pip_install(*arguments)}"
