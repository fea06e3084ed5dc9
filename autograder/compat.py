"""Every change the pack makes to a third-party library's behaviour, in one place.

Each patch says which version it was written against, what it saves (measured by
`benchmarks/patches.py`, each against no patch in the same run: the last run is in
`results/benchmarks/patches-*.txt`), and how to tell that it can go:
`tests/unit/test_compat.py` fails when the upstream code it works around has changed, so
that a patch is looked at again instead of silently doing nothing (or harm).

- `skip_rfc3987_syntax()`: jsonschema 4.26 registers its "iri" format checks with
  `rfc3987_syntax` whenever that module is importable (jupyter-events installs it), and
  importing it builds about 40 Earley parsers: 2 to 3.5 s in every grading process. No
  schema the grader validates (nbformat's, nbgrader's) has an "iri" format. It must run
  before `jsonschema` is first imported (`nbformat` imports it), so every entry point of
  the grader calls it first.
- `read_alembic_head_in_process()`: nbgrader 0.9.6 stamps a new gradebook with its
  alembic head, which it finds by running the `alembic heads` command, a new Python that
  imports nbgrader again (6 s on a 2-core machine, per gradebook). The same head is read
  here with alembic's Python API (alembic 1.20); nbgrader's own way runs if that fails.
- `check_schemas_once()`: nbgrader 0.9.6 validates every cell's metadata with
  `jsonschema.validate`, which checks the schema itself before every instance (about
  0.2 s per graded notebook). Here the schema is checked once per process; each instance
  is validated as before.
- `NBCLIENT_HOOKS`: the private methods of nbclient 0.11's `NotebookClient` and
  jupyter_client 8.10's kernel manager that the grader overrides (a kernel killed rather
  than shut down, a timeout turned into an error in its cell, a kernel's sockets closed
  with it); tested to exist. And one public call of nbclient's that the grader relies on
  being the way a cell reaches the kernel: `NotebookClient.async_execute_cell` sends
  `self.kc.execute(cell.source, ...)`, which `grading.testsource.sending` points at a
  test cell's reference or witness version.
"""

import functools
import json
import sys
from pathlib import Path

__all__ = ["skip_rfc3987_syntax", "read_alembic_head_in_process", "check_schemas_once",
           "NBCLIENT_HOOKS", "WRITTEN_AGAINST"]

WRITTEN_AGAINST = {"nbgrader": "0.9.6", "jsonschema": "4.26.0", "alembic": "1.20.1",
                   "nbclient": "0.11.0", "jupyter_client": "8.10.0"}
NBCLIENT_HOOKS = {
    "nbclient.NotebookClient": ("_async_cleanup_kernel", "_async_handle_timeout"),
    "jupyter_client.manager.AsyncKernelManager": ("_async_cleanup_resources",),
}


def skip_rfc3987_syntax():
    """Keep jsonschema from importing rfc3987_syntax (see the module doc). Does nothing
    once jsonschema is imported: its formats are registered when it is imported."""
    if "jsonschema" not in sys.modules:
        sys.modules.setdefault("rfc3987_syntax", None)


def read_alembic_head_in_process():
    """Make nbgrader read its gradebook schema version without a new process (see the
    module doc). A second call does nothing."""
    import nbgrader.api as gradebook_api

    original = gradebook_api.get_alembic_version
    if getattr(original, "in_process", False):
        return

    @functools.cache
    def head():
        try:
            from alembic.config import Config
            from alembic.script import ScriptDirectory

            cfg = Config()
            cfg.set_main_option(
                "script_location", str(Path(gradebook_api.__file__).parent / "alembic")
            )
            heads = ScriptDirectory.from_config(cfg).get_heads()
            if len(heads) == 1:
                return heads[0]
        except Exception:  # noqa: BLE001 (fall back to nbgrader's own way)
            pass
        return original()

    head.in_process = True
    gradebook_api.get_alembic_version = head


class _SchemaCheckedOnce:
    """`jsonschema` as nbgrader's cell metadata validation uses it, with `validate`
    checking each schema once; the instance is validated the same way (the schema's
    validator, the best-matching error raised)."""

    schema_checked_once = True

    def __init__(self, module):
        self._module = module
        self._validators = {}  # the schema as JSON text -> its validator

    def __getattr__(self, name):
        return getattr(self._module, name)

    def validate(self, instance, schema, cls=None, *args, **kwargs):
        if cls is not None or args or kwargs:
            return self._module.validate(instance, schema, cls, *args, **kwargs)
        key = json.dumps(schema, sort_keys=True)
        validator = self._validators.get(key)
        if validator is None:
            cls = self._module.validators.validator_for(schema)
            cls.check_schema(schema)
            validator = self._validators.setdefault(key, cls(schema))
        error = self._module.exceptions.best_match(validator.iter_errors(instance))
        if error is not None:
            raise error


def check_schemas_once():
    """Make nbgrader's cell metadata validation check its schema once per process, not
    once per cell; a second call does nothing."""
    try:
        import nbgrader.nbgraderformat.common as common
    except ImportError:
        return
    if not getattr(common.jsonschema, "schema_checked_once", False):
        common.jsonschema = _SchemaCheckedOnce(common.jsonschema)
