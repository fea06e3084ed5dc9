"""What the coordinator and its workers share and check: the pack's fingerprint, the
bundle that carries the course to a worker, the names of the files that travel.

Made on the coordinator (`make_bundle`), opened on a worker (`unpack_bundle`); both sides
compute `pack_fingerprint` and refuse to grade for another pack (`PackMismatch`).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autograder.grading.course import CONFIG_FILE, SOURCE

if TYPE_CHECKING:
    from autograder.grading.plan import Sandbox

__all__ = ["BUNDLE_KEY", "SAFE_NAME", "PackMismatch", "pack_fingerprint", "make_bundle",
           "unpack_bundle", "read_about"]

BUNDLE_KEY = "residual-pack-bundle"  # scheduler metadata: [BUNDLE_KEY, hash] -> bytes
ABOUT = "bundle.json"  # the bundle's own description: assignment, pack, limits, level
REFERENCES = "references.json"  # the coordinator's reference records for the assignment
SAFE_NAME = re.compile(r"^[^/\\\0]+\.(ipynb|html)$")  # a file that may travel either way
_PACKAGES = ("autograder", "microgpt", "torchtrack")


class PackMismatch(RuntimeError):
    """A worker runs another version of the pack than the coordinator."""


def pack_fingerprint() -> str:
    """The pack's version and a digest of its code (every .py file of its packages): what
    a worker must share with the coordinator to grade for it."""
    import importlib.metadata
    import importlib.util

    try:
        version = importlib.metadata.version("microgpt-residuals")
    except importlib.metadata.PackageNotFoundError:
        version = "0+unknown"
    digest = hashlib.sha256()
    for name in _PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            continue
        folder = Path(list(spec.submodule_search_locations)[0])
        for path in sorted(folder.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            digest.update(f"{name}/{path.relative_to(folder)}".encode() + b"\0")
            digest.update(path.read_bytes())
    return f"{version}+{digest.hexdigest()[:16]}"


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def make_bundle(course: str | os.PathLike[str], assignment: str,
                sandbox: Sandbox | None) -> tuple[bytes, str]:
    """(bytes, sha256) of what a worker needs to grade `assignment`: the course config,
    every assignment's source (intake names another assignment's notebook by its cells),
    the reference records the coordinator judges with (`sandbox.references`), and the
    run's limits and isolation."""
    from dataclasses import asdict

    course = Path(course)
    files = {CONFIG_FILE: (course / CONFIG_FILE).read_bytes()}
    for path in sorted((course / SOURCE).rglob("*")):
        parts = path.relative_to(course).parts
        if path.is_file() and not any(p in ("__pycache__", ".ipynb_checkpoints") for p in parts):
            files["/".join(parts)] = path.read_bytes()
    if sandbox is not None and assignment in sandbox.references:
        # the expected observations this run judges with: the workers judge with the same
        references = sandbox.references[assignment]
        files[REFERENCES] = json.dumps(references, sort_keys=True).encode()
    about = {"assignment": assignment, "pack": pack_fingerprint(),
             "limits": asdict(sandbox.limits) if sandbox is not None else None,
             "level": sandbox.level if sandbox is not None else None}
    files[ABOUT] = json.dumps(about, sort_keys=True).encode()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            _add(tar, name, files[name])
    data = raw.getvalue()
    return data, hashlib.sha256(data).hexdigest()


def unpack_bundle(data: bytes, folder: str | os.PathLike[str]) -> None:
    """Extract the bundle `data` into `folder`, refusing any entry that is not a plain
    file inside it."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        for member in tar.getmembers():
            if not member.isfile() or member.name.startswith("/") or ".." in member.name.split("/"):
                raise PackMismatch(f"bad bundle entry {member.name!r}")
        try:
            tar.extractall(folder, filter="data")
        except TypeError:  # a Python without extraction filters: the members were checked
            tar.extractall(folder)


def read_about(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The description of the bundle unpacked in `folder`, refused when it was made by
    another pack than this process runs."""
    about = json.loads((Path(folder) / ABOUT).read_text())
    mine = pack_fingerprint()
    if about["pack"] != mine:
        raise PackMismatch(f"the bundle is for pack {about['pack']}, this worker runs {mine}")
    return about
