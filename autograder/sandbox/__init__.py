"""Isolation of one kernel process by well-kept tools: bubblewrap (namespaces, a read-only
view of exactly what a Python kernel needs, no network), a seccomp filter made with
libseccomp, cgroups for memory and processes where the machine has them, util-linux's
setpriv, prlimit and unshare for the rest.

Standard library and pyseccomp only: nothing of the rest of `autograder` (nor microgpt,
nbgrader or jupyter) is imported here. `bubblewrap` is the entry point (`probe`, `Limits`,
`SandboxSpec`, `command`, `start`); `seccomp` writes the filter; `cgroups` makes, reads
and removes one kernel's cgroups.
"""
