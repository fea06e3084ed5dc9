"""autograder/sandbox: the argument list, the seccomp filter and the probe, without
running anything (no root, no bwrap needed)."""

import dataclasses
import sys
from pathlib import Path

import pytest

from autograder.sandbox import bubblewrap, cgroups, seccomp
from autograder.sandbox.limits import MiB


def _spec(tmp_path):
    return bubblewrap.SandboxSpec(argv=(bubblewrap.PYTHON, "-c", "pass"),
                                  writable=tmp_path, site_packages=tmp_path,
                                  library=tmp_path, env={"A": "1"})


def test_as_root_the_chain_is_cgroups_mount_namespace_rlimits_uid_bwrap(tmp_path):
    level = bubblewrap.Level("root", "m", "v1", {})
    res = bubblewrap.Resources(seccomp_fd=7, uid=2100000005,
                               cgroup_procs=("/cg/memory/k/cgroup.procs",),
                               stage=Path("/stage"))
    argv = bubblewrap.command(_spec(tmp_path), bubblewrap.Limits(), level, res)
    assert argv[:2] == ["/bin/sh", "-c"]
    script = argv[2]
    assert "echo $$ > /cg/memory/k/cgroup.procs" in script
    assert "exec unshare --mount --propagation private" in script
    for flag in ("--reuid=2100000005", "--clear-groups", "--inh-caps=-all",
                 "--bounding-set=-all", "--no-new-privs", "--unshare-all", "--unshare-user",
                 "--disable-userns", "--die-with-parent", "--new-session", "--seccomp 7",
                 "--clearenv", "--remount-ro /", "--setenv PYTHONPATH /opt/lib",
                 "--setenv A 1", "--fsize=67108864:67108864"):
        assert flag in script, flag
    # with a memory cgroup, no address-space limit (the cgroup reports the OOM instead)
    assert "--as=" not in script and "--nproc=" not in script
    # bwrap binds only staged sources: the host paths appear only in the mount lines
    bwrap_part = script[script.index("bwrap --unshare-all"):]
    assert str(tmp_path) not in bwrap_part


def test_without_root_bwrap_runs_directly_with_rlimits(tmp_path):
    level = bubblewrap.Level("userns", "m")
    argv = bubblewrap.command(_spec(tmp_path), bubblewrap.Limits(memory=100 * MiB),
                              level, bubblewrap.Resources(seccomp_fd=5))
    assert argv[0] == "prlimit"
    assert f"--as={100 << 20}:{100 << 20}" in argv and "--nproc=256:256" in argv
    assert "setpriv" not in argv and "unshare" not in argv
    i = argv.index("--bind")
    assert argv[i + 1:i + 3] == [str(tmp_path), bubblewrap.RUN]


def test_the_chain_goes_on_only_while_its_starter_lives(tmp_path):
    """The parent-death signal is set after the change of uid, and a shell then checks that
    the parent is still the starter: a grader killed while the chain starts leaves nothing."""
    level = bubblewrap.Level("userns", "m")
    argv = bubblewrap.command(_spec(tmp_path), bubblewrap.Limits(), level,
                              bubblewrap.Resources(seccomp_fd=5, uid=2100000005, parent=4242))
    i = argv.index("setpriv")
    assert argv[i + 1:i + 3] == ["--pdeathsig", "SIGKILL"]
    j = argv.index("/bin/sh")
    assert argv.index("--reuid=2100000005") < j < argv.index(bubblewrap._bwrap() or "bwrap")
    assert argv[j + 2] == '[ "$PPID" = 4242 ] || exit 125; exec "$@"'


def test_no_sandbox_no_command(tmp_path):
    with pytest.raises(bubblewrap.SandboxError, match="not installed"):
        bubblewrap.command(_spec(tmp_path), bubblewrap.Limits(),
                           bubblewrap.Level("none", "no sandbox: bubblewrap is not installed"),
                           bubblewrap.Resources(seccomp_fd=3))


def test_the_probe_says_when_bwrap_is_missing(monkeypatch):
    monkeypatch.setattr(bubblewrap, "_bwrap", lambda: None)
    level = bubblewrap.probe()
    assert level.kind == "none" and "bubblewrap is not installed" in level.message
    # the line that installs it, as printed (the checkout's scripts/ is not in the wheel)
    assert level.message.endswith("as root: apt-get update && apt-get install -y bubblewrap)")
    assert "scripts/" not in level.message


def test_every_denied_call_is_known_to_libseccomp():
    import pyseccomp

    for name in seccomp.DENIED + seccomp.UNCOUNTED_MEMORY + ("clone", "clone3"):
        assert pyseccomp.resolve_syscall(pyseccomp.system_arch(), name) >= 0, name
    with seccomp.bpf_file(True) as f:
        program = f.read()
    assert program and len(program) % 8 == 0  # struct sock_filter: 8 bytes each


def test_cgroup_paths_are_our_own_nested(tmp_path):
    own = cgroups._own_paths("4:memory:/a/b\n8:pids:/\n0::/x\n")
    assert own == {"memory": "/a/b", "pids": "/", "": "/x"}


def test_a_v2_kernel_cgroup_is_written_and_read(tmp_path):
    group = cgroups.KernelCgroups("v2", tmp_path, 64 << 20, 16, cpus=0.5, name="k")
    folder = tmp_path / "k"
    assert (folder / "memory.max").read_text() == f"{64 << 20}\n"
    assert (folder / "pids.max").read_text() == "16\n"
    assert (folder / "cpu.max").read_text() == "50000 100000\n"
    (folder / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    (folder / "pids.events").write_text("max 2\n")
    report = group.report()
    assert report["oom_kills"] == 1 and report["pids_refused"] == 2
    assert group.procs_files == [str(folder / "cgroup.procs")]


def test_with_limits_only_the_sandbox_paths_become_host_paths_and_the_rest_stays(tmp_path):
    """The kernel's Python and folder are named as the sandbox names them; the grader's
    connection file is a host path under /tmp already, and must stay as it is (a kernel
    told the wrong file never connects: each student then waited out the start timeout)."""
    spec = bubblewrap.SandboxSpec(
        argv=(bubblewrap.PYTHON, "-m", "k", "-f", "/tmp/rp-1/c/kernel.json",
              bubblewrap.RUN + "/x.py"),
        writable=tmp_path, site_packages=tmp_path, library=tmp_path, env={"A": "1"},
        workdir="/tmp")
    argv = bubblewrap.command(spec, bubblewrap.Limits(), bubblewrap.limits_level("test"),
                              bubblewrap.Resources(seccomp_fd=None, parent=4242))
    tail = argv[-6:]
    assert tail == [sys.executable, "-m", "k", "-f", "/tmp/rp-1/c/kernel.json",
                    f"{tmp_path}/x.py"]
    assert argv[argv.index("-C") + 1] == f"{tmp_path}/tmp"


def test_one_limits_in_bytes_for_the_grader_and_the_sandbox(tmp_path):
    """The grader's `Limits` is the sandbox's (one class, every size in bytes): sizes that
    are not whole MiB reach prlimit and the tmpfs folders as they are."""
    from autograder.sandbox import limits

    assert bubblewrap.Limits is limits.Limits
    assert not [f.name for f in dataclasses.fields(limits.Limits) if f.name.endswith("_mib")]
    odd = limits.Limits(memory=100 * limits.MiB + 4096, disk=3 * limits.MiB + 512,
                        file_size=5 * limits.MiB + 1, open_files=99)
    argv = bubblewrap.command(_spec(tmp_path), odd, bubblewrap.Level("userns", "m"),
                              bubblewrap.Resources(seccomp_fd=5))
    memory, file_size = 100 * limits.MiB + 4096, 5 * limits.MiB + 1
    assert f"--as={memory}:{memory}" in argv and f"--fsize={file_size}:{file_size}" in argv
    assert "--nofile=99:99" in argv
    for folder in ("/tmp", "/dev/shm"):
        i = argv.index(folder)
        assert argv[i - 3:i] == ["--size", str(3 * limits.MiB + 512), "--tmpfs"], folder
