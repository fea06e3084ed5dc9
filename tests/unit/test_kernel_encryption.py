"""A student's kernels talk over encrypted sockets: Validate's (the release's
`nbgrader_config.py`, `release.STUDENT_CONFIG`) and the Lab's (`validate.encrypt_kernels`,
run when the student's server extension loads). Over plain TCP, ipykernel 7.4 prints at
each kernel start that anyone who can listen on the machine reads the code and its
outputs. tests/integration/test_student_release.py runs both from the student's install:
the README's `nbgrader validate`, and a cell run through the Lab's own websocket."""

from types import SimpleNamespace

import pytest
import zmq
from jupyter_client.manager import KernelManager
from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from autograder.authoring.release import STUDENT_CONFIG
from autograder.student.validate import encrypt_kernels

WARNING = "without encryption"


def _student_config(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text(STUDENT_CONFIG, encoding="utf-8")
    return PyFileConfigLoader("nbgrader_config.py", path=str(tmp_path)).load_config()


def test_validates_kernel_is_encrypted_where_pyzmq_can(tmp_path, monkeypatch):
    assert zmq.has("curve"), "this pyzmq has no CURVE: the test means nothing here"
    assert _student_config(tmp_path).KernelManager.transport_encryption == "auto"
    # without CURVE, "auto" would refuse to start any kernel: the line is left out
    monkeypatch.setattr(zmq, "has", lambda capability: False)
    (tmp_path / "without").mkdir()
    assert "KernelManager" not in _student_config(tmp_path / "without")


def _run_a_cell(config, log):
    """(connection info, the kernel's stderr) of a real ipykernel started as nbclient starts
    Validate's (a KernelManager given the config), after it ran `print(6 * 7)`."""
    km = KernelManager(config=config)
    with open(log, "w", encoding="utf-8") as stderr:
        km.start_kernel(stderr=stderr, extra_arguments=["--IPKernelApp.ignore_cwd=True"])
        try:
            info = km.get_connection_info()
            client = km.client()
            client.start_channels()
            client.wait_for_ready(timeout=60)
            said = []
            reply = client.execute_interactive(
                "print(6 * 7)", timeout=60, output_hook=lambda msg: said.append(msg))
            client.stop_channels()
        finally:
            km.shutdown_kernel(now=True)
    assert reply["content"]["status"] == "ok", reply
    assert any(m["content"].get("text") == "42\n" for m in said), said
    return info, log.read_text(encoding="utf-8")


def test_a_kernel_started_with_the_student_config_is_encrypted_and_answers(tmp_path):
    info, stderr = _run_a_cell(_student_config(tmp_path), tmp_path / "kernel.log")
    assert info.get("curve_publickey")
    assert WARNING not in stderr, stderr


def test_the_test_can_see_the_warning(tmp_path):
    """Control: the same kernel without the config has no keys and prints the warning this
    file looks for (so its absence above means encrypted sockets, not a moved text)."""
    info, stderr = _run_a_cell(Config(), tmp_path / "kernel.log")
    assert not info.get("curve_publickey")
    assert WARNING in stderr, stderr


def _server(config=None):
    config = config or Config()
    return SimpleNamespace(config=config, kernel_manager=AsyncMappingKernelManager(
        config=config))


def test_the_labs_kernels_are_encrypted():
    server = _server()
    assert server.kernel_manager.transport_encryption == "disabled"  # jupyter_server's own
    assert encrypt_kernels(server) is True
    assert server.kernel_manager.transport_encryption == "auto"


@pytest.mark.parametrize("section", ["MappingKernelManager", "AsyncMappingKernelManager"])
def test_the_servers_own_setting_wins(section):
    config = Config()
    config[section] = Config({"transport_encryption": "disabled"})
    server = _server(config)
    assert encrypt_kernels(server) is False
    assert server.kernel_manager.transport_encryption == "disabled"


def test_without_curve_the_lab_is_left_as_it_is(monkeypatch):
    monkeypatch.setattr(zmq, "has", lambda capability: False)
    server = _server()
    assert encrypt_kernels(server) is False
    assert server.kernel_manager.transport_encryption == "disabled"


def test_a_server_without_the_setting_is_left_as_it_is():
    """An older jupyter_server (before `transport_encryption`) or none at all."""
    assert encrypt_kernels(SimpleNamespace(config=Config(), kernel_manager=None)) is False
    plain = SimpleNamespace(config=Config(), kernel_manager=SimpleNamespace(
        has_trait=lambda name: False))
    assert encrypt_kernels(plain) is False
