"""The seccomp filter every sandboxed kernel runs under, made with libseccomp (pyseccomp)
and handed to bubblewrap as a BPF program on a file descriptor (`bwrap --seccomp FD`).

Everything is allowed but the calls below, which fail with EPERM (clone3 with ENOSYS, so
that glibc falls back to clone, whose namespace flags the filter can see). Calls made for
another architecture (32-bit calls from a 64-bit process) kill the process: libseccomp's
default for an architecture the filter does not name.
"""

import errno
import tempfile
from typing import IO, Any

import pyseccomp

# denied with EPERM, whatever their arguments
DENIED = (
    # new namespaces and entering others: no user namespace in which a student is root
    "unshare", "setns",
    # the filesystem view: bubblewrap built it, nobody changes it
    "mount", "umount2", "pivot_root", "chroot",
    "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
    # kernel keyrings: a secret left by one kernel for the next one of the same uid
    "keyctl", "add_key", "request_key",
    # other processes' memory and file descriptors
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "process_madvise",
    "kcmp",
    # kernel attack surface a notebook never needs
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "memfd_secret",
    # the machine itself
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "open_by_handle_at", "name_to_handle_at", "acct", "swapon", "swapoff", "reboot",
    "quotactl", "syslog", "vhangup", "lookup_dcookie",
)

# denied too where no memory cgroup counts them (rlimits do not: memory held in a memfd or
# a System V segment is outside RLIMIT_AS once it is unmapped)
UNCOUNTED_MEMORY = ("memfd_create", "shmget")

# clone(2) flags that make a namespace (CLONE_NEWTIME shares its bit with CSIGNAL in
# clone(2), so it can only be asked for with clone3, which is refused as a whole)
CLONE_NAMESPACES = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}

# personality(2) flags that change the memory layout or what exec does
PERSONALITY_FLAGS = {
    "UNAME26": 0x0020000,
    "ADDR_NO_RANDOMIZE": 0x0040000,
    "FDPIC_FUNCPTRS": 0x0080000,
    "MMAP_PAGE_ZERO": 0x0100000,
    "ADDR_COMPAT_LAYOUT": 0x0200000,
    "READ_IMPLIES_EXEC": 0x0400000,
    "ADDR_LIMIT_32BIT": 0x0800000,
    "SHORT_INODE": 0x1000000,
    "WHOLE_SECONDS": 0x2000000,
    "STICKY_TIMEOUTS": 0x4000000,
    "ADDR_LIMIT_3GB": 0x8000000,
}


def build(deny_uncounted_memory: bool = False) -> Any:
    """The filter (a pyseccomp.SyscallFilter). `deny_uncounted_memory`: also refuse
    memfd_create and shmget (where no memory cgroup would count what they hold)."""
    f = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    eperm = pyseccomp.ERRNO(errno.EPERM)
    names = DENIED + (UNCOUNTED_MEMORY if deny_uncounted_memory else ())
    for name in names:
        try:
            f.add_rule(eperm, name)
        except (OSError, ValueError, RuntimeError):
            # a call this architecture (or this libseccomp) does not know cannot be made
            continue
    f.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
    for bit in CLONE_NAMESPACES.values():
        f.add_rule(eperm, "clone", pyseccomp.Arg(0, pyseccomp.MASKED_EQ, bit, bit))
    for bit in PERSONALITY_FLAGS.values():
        f.add_rule(eperm, "personality", pyseccomp.Arg(0, pyseccomp.MASKED_EQ, bit, bit))
    return f


def bpf_file(deny_uncounted_memory: bool = False) -> IO[bytes]:
    """An open file (rewound) holding the filter as a BPF program, for `bwrap --seccomp
    FD`; the caller passes its fileno() to the sandbox and closes it after the start."""
    out = tempfile.TemporaryFile()  # noqa: SIM115 (the caller closes it)
    build(deny_uncounted_memory).export_bpf(out)
    out.flush()
    out.seek(0)
    return out


def describe(deny_uncounted_memory: bool = False) -> str:
    """The filter in words, for the log."""
    names = list(DENIED) + (list(UNCOUNTED_MEMORY) if deny_uncounted_memory else [])
    return ("EPERM: " + ", ".join(names) + "; clone with a namespace flag; personality "
            "with a flag that changes the memory layout or exec; ENOSYS: clone3")
