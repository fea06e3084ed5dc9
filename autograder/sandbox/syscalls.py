"""The Linux calls the sandbox needs that Python's `os` does not have, through ctypes.

Standard library only: the launcher, which runs as root, imports this.
"""

import ctypes
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}

_libc = None


def libc():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def check(result, what):
    """Raise OSError (with errno's words) when a libc call returned non-zero."""
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(src, target, fstype, flags, data=None):
    check(libc().mount(src and src.encode(), target.encode(), fstype and fstype.encode(),
                       ctypes.c_ulong(flags), data and data.encode()), f"mount {target}")


def umount(target):
    """Detach the mount at `target` (lazily: it goes once nothing uses it)."""
    check(libc().umount2(target.encode(), MNT_DETACH), f"umount {target}")


def unshare(flags):
    check(libc().unshare(flags), "unshare")


def prctl(option, value):
    check(libc().prctl(option, ctypes.c_ulong(value), 0, 0, 0), "prctl")


def pivot_root(new_root, put_old):
    """True when the kernel moved the root to `new_root` (False: no such call here)."""
    number = SYS_PIVOT_ROOT.get(os.uname().machine)
    return number is not None and \
        libc().syscall(number, new_root.encode(), put_old.encode()) == 0


class _SockFprog(ctypes.Structure):
    """struct sock_fprog: the length and address of a BPF program (seccomp(2))."""
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def load_seccomp(program):
    """Put this thread under the seccomp filter `program` (a BPF program as bytes: 8-byte
    struct sock_filter instructions, as libseccomp exports it). Needs no_new_privs (or
    CAP_SYS_ADMIN); the filter is inherited across fork and exec and cannot be removed."""
    if not program or len(program) % 8:
        raise OSError(f"seccomp: a BPF program of {len(program)} bytes")
    buf = ctypes.create_string_buffer(bytes(program), len(program))
    prog = _SockFprog(len(program) // 8, ctypes.addressof(buf))
    check(libc().prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER),
                       ctypes.byref(prog), ctypes.c_ulong(0), ctypes.c_ulong(0)),
          "seccomp filter")
