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


def test_reading_a_notebook_builds_no_iri_parser_at_start_up():
    """Every nbgrader and jupyter command, and every grading process, imports nbformat and
    so jsonschema, which from 4.25 on imports rfc3987-syntax at once: its Lark parsers took
    1.3 to 1.6 s of CPU more in each of those processes here
    (results/benchmarks/jsonschema-start-2026-12-06.txt). pyproject.toml holds jsonschema
    below 4.25 (the module doc); this fails when a change of the environment brings the
    cost back, and passes on a later jsonschema that imports it lazily, which would let the
    bound go."""
    code = ("import sys, nbformat, nbgrader.apps\n"
            "nbformat.validate(nbformat.v4.new_notebook())\n"
            "print('rfc3987_syntax' in sys.modules, 'lark' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False False"


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


def _named(entry):
    return f"{entry.library}:{entry.name}"


@pytest.mark.parametrize("entry", compat.PRIVATE_NAMES, ids=_named)
def test_each_private_name_the_pack_uses_is_still_upstream(entry):
    """The name is gone (or renamed): whatever of ours overrides, calls or reads it now
    does nothing or fails; read `entry.where` against the new upstream code."""
    assert entry.library in compat.WRITTEN_AGAINST, f"no version recorded for {entry.library}"
    assert entry.how in ("overrides", "replaces", "calls", "reads", "sets")
    owner = compat.resolve(entry.owner)
    if entry.how in ("overrides", "replaces", "calls"):
        assert callable(getattr(owner, entry.name, None)), f"{entry.owner}.{entry.name} is gone"


@pytest.mark.parametrize("entry", [e for e in compat.PRIVATE_NAMES if e.source], ids=_named)
def test_each_private_name_has_the_upstream_source_it_was_checked_against(entry):
    """Upstream changed the code of a private name the pack depends on (its signature or
    what it does): read the change against `entry.relies_on` and `entry.where`, then
    record the new hash (and the version in WRITTEN_AGAINST)."""
    found = getattr(compat.resolve(entry.owner), entry.name)
    now = compat.source_hash(found)
    assert now == entry.source, (
        f"{entry.owner}.{entry.name}{inspect.signature(found)} changed upstream "
        f"({inspect.getsourcefile(found)}): source hash {now}, checked on "
        f"{entry.library} {compat.WRITTEN_AGAINST[entry.library]} as {entry.source}; "
        f"the pack relies on: {entry.relies_on}")


@pytest.mark.parametrize("entry", [e for e in compat.PRIVATE_NAMES if e.used_in], ids=_named)
def test_upstream_still_uses_each_private_name_the_way_the_pack_relies_on(entry):
    for path, text in entry.used_in:
        assert text in inspect.getsource(compat.resolve(path)), (
            f"{path} no longer has {text!r}: {entry.name} may not be reached the way "
            f"{entry.where} relies on ({entry.relies_on})")


def _our_subclasses():
    """The pack's subclasses of other libraries' classes (module level or made by a
    factory), to check that none overrides a private name the registry does not list."""
    from autograder import runner
    from autograder.grading import execute, feedback, lms_export, nbgrader_steps, reference_run
    from autograder.kernel import gradekernel
    from autograder.student import validate

    found = [runner.ipc_kernel_manager(), reference_run._client_class(),
             gradekernel._kernel_class(), validate._budgeted_classes()]
    for module in (execute, feedback, lms_export, nbgrader_steps):
        found += [v for v in vars(module).values()
                  if isinstance(v, type) and v.__module__ == module.__name__]
    for cls in list(found):  # classes made inside a factory whose class is returned
        for value in vars(cls).values():
            for v in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(v, type) and v.__module__.startswith("autograder") \
                        and v not in found:
                    found.append(v)
    return found


def _upstream_private_overrides(cls):
    """(upstream class, name) for each single-underscore name `cls` defines that a
    third-party class in its MRO defines too (functions and descriptors: the tables that
    traitlets' metaclass puts on every class are not ours)."""
    kinds = (staticmethod, classmethod, property)
    ours = [name for name, value in vars(cls).items()
            if name.startswith("_") and not name.startswith("__")
            and (inspect.isfunction(value) or isinstance(value, kinds))]
    for name in ours:
        for base in cls.__mro__[1:]:
            if not base.__module__.startswith(("autograder", "builtins")) \
                    and name in vars(base):
                yield f"{base.__module__}.{base.__qualname__}", name
                break


def _unregistered_overrides():
    """(how many classes were looked at, the overrides of a private name not registered)."""
    registered = {e.name for e in compat.PRIVATE_NAMES if e.how in ("overrides", "replaces")}
    classes = _our_subclasses()
    unlisted = sorted({f"{cls.__qualname__}: {where}.{name}"
                       for cls in classes for where, name in _upstream_private_overrides(cls)
                       if name not in registered})
    return len(classes), unlisted


def test_no_subclass_of_ours_overrides_an_unregistered_private_name():
    """An override of another library's private method not listed in
    compat.PRIVATE_NAMES (with its version and source hash) would go unreviewed when the
    library changes: list it there. In a process of its own: making the grading kernel's
    class imports ipykernel's kernel, which changes where tqdm writes in later tests."""
    import json
    from pathlib import Path

    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import test_compat; "
            "print(json.dumps(test_compat._unregistered_overrides()))")
    run = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent)],
                         capture_output=True, text=True, check=True)
    looked_at, unlisted = json.loads(run.stdout.strip().splitlines()[-1])
    assert looked_at >= 8
    assert unlisted == []


def test_the_test_suites_overrides_are_registered():
    """tests/conftest.py's classes: their private methods that override xdist's."""
    import ast
    from pathlib import Path

    import xdist.scheduler

    tree = ast.parse((Path(__file__).parents[1] / "conftest.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            bases = [getattr(xdist.scheduler, b.id, None) for b in node.bases
                     if isinstance(b, ast.Name)]
            for item in node.body:
                name = getattr(item, "name", "")
                if name.startswith("_") and not name.startswith("__") and any(
                        b is not None and hasattr(b, name) for b in bases):
                    found.add(name)
    registered = {e.name for e in compat.PRIVATE_NAMES if e.library == "pytest-xdist"}
    assert found == {"_split_scope"} and found <= registered


def test_a_gradebook_url_without_its_password_is_still_a_named_tuple_replace():
    from sqlalchemy.engine import make_url

    from autograder.grading.course import without_password

    url = make_url("postgresql+psycopg2://grader:secret@db.example/gradebook")
    assert isinstance(url, tuple) and url._replace(password=None).password is None
    assert without_password(str(url.render_as_string(hide_password=False))) \
        == "postgresql+psycopg2://grader@db.example/gradebook"


def test_the_nbclient_hooks_are_the_registered_overrides():
    registered = {e.name for e in compat.PRIVATE_NAMES if e.how == "overrides"}
    for owner, names in compat.NBCLIENT_HOOKS.items():
        found = compat.resolve(owner)
        for name in names:
            assert callable(getattr(found, name, None)), f"{owner}.{name}"
            assert name in registered, name
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
