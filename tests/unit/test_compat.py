"""The patches on third-party libraries (`autograder/compat.py`): each still does what it
says, and each test fails when the upstream code it works around has changed, so that the
patch is looked at again (kept, adapted or dropped) rather than silently left behind."""

import importlib.metadata
import inspect
import subprocess
import sys

import nbclient
import pytest

from autograder import compat


def _version(name):
    return importlib.metadata.version(name)


def test_the_versions_written_against_are_the_ones_installed():
    """A new release of any of them: read its code again against each patch below, then
    update WRITTEN_AGAINST."""
    installed = {name: _version(name) for name in compat.WRITTEN_AGAINST}
    assert installed == compat.WRITTEN_AGAINST


def test_rfc3987_syntax_is_still_what_jsonschema_would_import():
    """The patch is needed while jsonschema imports rfc3987_syntax when it can; when it no
    longer does (or the module is gone), `skip_rfc3987_syntax` can go."""
    import jsonschema._format as formats

    assert "rfc3987_syntax" in inspect.getsource(formats)
    found = subprocess.run([sys.executable, "-c", "import rfc3987_syntax"],
                           capture_output=True)
    assert found.returncode == 0, "rfc3987_syntax is no longer installed: drop the patch"


def test_without_rfc3987_syntax_jsonschema_still_validates_notebooks():
    code = ("from autograder.compat import skip_rfc3987_syntax; skip_rfc3987_syntax()\n"
            "import sys, nbformat\n"
            "nb = nbformat.v4.new_notebook(); nbformat.validate(nb)\n"
            "print(sys.modules.get('rfc3987_syntax', 'absent'))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert run.stdout.strip() == "None"


def test_nbgrader_still_finds_its_alembic_head_in_a_new_process():
    """While nbgrader runs `alembic heads` as a command, reading the head in process saves
    a Python start; the head read here is the command's."""
    import nbgrader.api as gradebook_api

    assert "check_output(['alembic'" in inspect.getsource(gradebook_api), \
        "nbgrader no longer starts alembic: drop the patch"
    compat.read_alembic_head_in_process()
    patched = gradebook_api.get_alembic_version
    assert patched.in_process
    assert len(patched()) == 12  # an alembic revision id, read from nbgrader's scripts


def test_nbgrader_still_validates_each_cell_with_jsonschema_validate():
    import nbgrader.nbgraderformat.common as common

    module = getattr(common.jsonschema, "_module", common.jsonschema)
    source = inspect.getsource(common)
    assert "jsonschema.validate(" in source, "nbgrader validates differently: review the patch"
    compat.check_schemas_once()
    compat.check_schemas_once()
    assert common.jsonschema.schema_checked_once and common.jsonschema._module is module


def test_the_schema_checked_once_validates_as_jsonschema_does():
    import jsonschema
    import pytest

    from autograder.compat import _SchemaCheckedOnce

    once = _SchemaCheckedOnce(jsonschema)
    schema = {"type": "object", "properties": {"points": {"type": "number"}},
              "required": ["points"]}
    once.validate({"points": 2}, schema)
    for bad in ({}, {"points": "two"}):
        with pytest.raises(jsonschema.ValidationError) as ours:
            once.validate(bad, schema)
        with pytest.raises(jsonschema.ValidationError) as theirs:
            jsonschema.validate(bad, schema)
        assert ours.value.message == theirs.value.message


def test_the_nbclient_hooks_the_grader_overrides_still_exist():
    import importlib

    for owner, names in compat.NBCLIENT_HOOKS.items():
        module, _, cls = owner.rpartition(".")
        found = getattr(importlib.import_module(module), cls)
        for name in names:
            assert callable(getattr(found, name, None)), f"{owner}.{name}"
    assert nbclient.NotebookClient


def test_nbclient_still_sends_a_cell_through_kc_execute():
    """`testsource.sending` swaps the code nbclient sends: that holds only while nbclient
    sends a cell as `self.kc.execute(cell.source, ...)`."""
    source = inspect.getsource(nbclient.NotebookClient.async_execute_cell)
    assert "self.kc.execute(" in source and "cell.source" in source


def test_sending_swaps_the_code_and_puts_the_client_back():
    from autograder.grading.testsource import sending

    sent = []

    class Client:
        def execute(self, code, **kwargs):
            sent.append(code)
            return "msg-id"

    kc = Client()
    with sending(kc, "witness()"):
        assert kc.execute("student's source", store_history=True) == "msg-id"
    kc.execute("next cell")
    assert sent == ["witness()", "next cell"]
    with pytest.raises(RuntimeError), sending(kc, "x"):
        raise RuntimeError
    assert "execute" not in vars(kc)
