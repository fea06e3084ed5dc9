"""The state a graded kernel's tests depend on, recorded before any student code runs.

`Snapshot` is made when `gradekernel` is imported (before the kernel exists): it imports
our packages' modules and the standard ones the tests use, and keeps the tools the test
runner needs (`compile`, `exec`, `__import__`, the trace hooks...) as they were. At the
kernel's first execute request it records the module dicts, classes, functions, builtins,
`sys.path`, import hooks and streams; before each graded test cell `differences(fix=True)`
puts back what a student's cell changed and says what it was, and `hardened_modules()`
gives the test cell private copies of the check helpers. `private_import` is the
`__import__` a test cell gets: it hands out those copies.

Runs in the graded kernel only (it is part of `autograder.kernel`).
"""

import builtins
import functools
import importlib
import linecache
import os
import pkgutil
import signal
import sys
import threading
import traceback
import types

from autograder.kernel import policy

__all__ = ["Snapshot", "private_import", "MISSING", "ASSIGNMENT"]

# the assignment this kernel grades: its packages are guarded, its model answers switched off
ASSIGNMENT = os.environ.get(policy.ASSIGNMENT_VARIABLE, "")
# our packages: everything in them is imported before any student code runs
GUARDED_PACKAGES = policy.guarded_packages(ASSIGNMENT)
# standard modules whose module-level names (and classes) are recorded and put back
GUARDED_STDLIB = (
    "builtins", "math", "cmath", "numbers", "operator", "functools", "itertools",
    "contextlib", "random", "statistics", "copy", "traceback", "linecache",
    "importlib", "importlib._bootstrap", "importlib._bootstrap_external",
    # the report of a graded test cell is made with json (gradekernel)
    "json", "json.encoder", "json.decoder", "json.scanner",
)
# in the graded helpers' own globals these become read-only copies
FROZEN_STDLIB = ("math", "cmath", "numbers", "operator", "random", "statistics", "functools")
# modules of the guarded packages that are not loaded before the first cell
NOT_PRELOADED = frozenset({"microgpt.__main__", "autograder.kernel.gradekernel",
                           "torchtrack.seeds"})
# the torch track's checks import torch (seconds): loaded only where torch is graded
TORCH_CHECKS = "autograder.kernel.torchchecks"
# names in builtins that the kernel itself sets while it runs (results, input)
VOLATILE_BUILTINS = frozenset({"_", "__", "___", "input"})


def _preimport():
    """Import our packages' modules (not their subpackages) and the guarded stdlib ones."""
    for package in GUARDED_PACKAGES:
        try:
            pkg = importlib.import_module(package)
        except ImportError:
            continue
        for info in pkgutil.iter_modules(pkg.__path__, prefix=package + "."):
            if info.ispkg or info.name in NOT_PRELOADED or (
                    info.name == TORCH_CHECKS and "torchtrack" not in GUARDED_PACKAGES):
                continue
            try:
                importlib.import_module(info.name)
            except Exception:  # noqa: BLE001 (a module that cannot load here is not used)
                pass
    for name in GUARDED_STDLIB:
        importlib.import_module(name)


def _guarded(name):
    return name in GUARDED_STDLIB or any(
        name == p or name.startswith(p + ".") for p in GUARDED_PACKAGES
    )


def _our_package(name):
    return any(name == p or name.startswith(p + ".") for p in GUARDED_PACKAGES)


MISSING = object()


class Snapshot:
    """The state the graded tests depend on, recorded before any student code ran: the
    tools at import, the state at the kernel's first execute request (once the kernel
    has set itself up, and before the first cell runs)."""

    def __init__(self):
        _preimport()
        self.recorded = False
        # the runner's own tools, taken before anyone could replace them
        self.compile = builtins.compile
        self.exec = builtins.exec
        self.import_ = builtins.__import__
        self.settrace = sys.settrace
        self.setprofile = sys.setprofile
        self.gettrace = sys.gettrace
        self.getprofile = sys.getprofile
        self.thread_settrace = threading.settrace
        self.thread_setprofile = threading.setprofile
        self.format_exception = traceback.format_exception
        self.linecache = linecache.cache
        self.type_setattr = type.__setattr__
        self.type_delattr = type.__delattr__
        self.function = types.FunctionType
        self.module = types.ModuleType
        self.getsignal = signal.getsignal
        self.signal = signal.signal

    def record(self):
        self.recorded = True
        self.modules = {n: m for n, m in list(sys.modules.items()) if _guarded(n) and m is not None}
        self.names = {n: dict(vars(m)) for n, m in self.modules.items()}
        self.classes = {}
        for n, m in self.modules.items():
            for value in vars(m).values():
                if isinstance(value, type) and getattr(value, "__module__", None) == n:
                    self.classes[value] = dict(vars(value))
        self.builtins = dict(vars(builtins))
        # the functions themselves: a function changed in place (its code, its defaults)
        # is still the same object in its module's dict
        self.functions = {}
        spaces = [*(self.names.values()), *(self.classes.values())]
        for space in spaces:
            for value in space.values():
                if isinstance(value, (staticmethod, classmethod)):
                    value = value.__func__
                if isinstance(value, types.FunctionType) and value not in self.functions:
                    self.functions[value] = (value.__code__, value.__defaults__,
                                             value.__kwdefaults__, dict(value.__dict__))
        self.files = {n: getattr(m, "__file__", None) for n, m in self.modules.items()}
        self.package_dirs = [
            p for n in GUARDED_PACKAGES if n in self.modules
            for p in getattr(self.modules[n], "__path__", [])
        ]
        self.sys_lists = {
            "path": list(sys.path), "meta_path": list(sys.meta_path),
            "path_hooks": list(sys.path_hooks),
        }
        self.recursion_limit = sys.getrecursionlimit()
        self.streams = (sys.stdout, sys.stderr, sys.stdin, sys.excepthook, sys.displayhook)
        self.sigint = self.getsignal(signal.SIGINT)

    # ------------------------------------------------------------ compare and put back

    def differences(self, fix):
        """What differs from the recorded state (as short names); with `fix`, put it back."""
        found = []
        for name, module in self.modules.items():
            if sys.modules.get(name) is not module:
                found.append(f"sys.modules[{name!r}]")
                if fix:
                    sys.modules[name] = module
        for name in list(sys.modules):
            if _our_package(name) and name not in self.modules:
                module = sys.modules.get(name)
                where = getattr(module, "__file__", None) or ""
                if not any(where.startswith(d) for d in self.package_dirs):
                    found.append(f"sys.modules[{name!r}] (not ours)")
                    if fix:
                        del sys.modules[name]
        for name, saved in self.names.items():
            found += self._dict_differences(vars(self.modules[name]), saved, name, fix)
        for cls, saved in self.classes.items():
            found += self._class_differences(cls, saved, fix)
        found += self._dict_differences(vars(builtins), self.builtins, "builtins", fix,
                                        volatile=VOLATILE_BUILTINS)
        for function, (code, defaults, kwdefaults, attributes) in self.functions.items():
            if (function.__code__ is not code or function.__defaults__ is not defaults
                    or function.__kwdefaults__ is not kwdefaults
                    or function.__dict__ != attributes):
                found.append(f"{function.__module__}.{function.__qualname__} (changed in place)")
                if fix:
                    function.__code__ = code
                    function.__defaults__, function.__kwdefaults__ = defaults, kwdefaults
                    function.__dict__.clear()
                    function.__dict__.update(attributes)
        for key, saved in self.sys_lists.items():
            live = getattr(sys, key)
            if len(live) != len(saved) or any(a is not b for a, b in zip(live, saved)):
                found.append(f"sys.{key}")
                if fix:
                    live[:] = saved
                    sys.path_importer_cache.clear()
        if self.gettrace() is not None:
            found.append("a trace function (sys.settrace)")
        if self.getprofile() is not None:
            found.append("a profile function (sys.setprofile)")
        if fix:
            self.settrace(None)
            self.setprofile(None)
            self.thread_settrace(None)
            self.thread_setprofile(None)
            if sys.getrecursionlimit() != self.recursion_limit:
                sys.setrecursionlimit(self.recursion_limit)
            out, err, inp, hook, display = self.streams
            if sys.stdout is not out or sys.stderr is not err or sys.stdin is not inp:
                found.append("sys.stdout/stderr/stdin")
            sys.stdout, sys.stderr, sys.stdin = out, err, inp
            sys.excepthook, sys.displayhook = hook, display
            try:
                if self.getsignal(signal.SIGINT) is not self.sigint:
                    found.append("the SIGINT handler")
                    self.signal(signal.SIGINT, self.sigint)
            except (ValueError, TypeError):  # not the main thread, or not settable
                pass
        return found

    @staticmethod
    def _dict_differences(live, saved, where, fix, volatile=frozenset()):
        found = []
        for key in list(live):
            if key in volatile:
                continue
            if key not in saved:
                value = live[key]
                if isinstance(value, types.ModuleType):
                    continue  # a submodule imported later: legitimate
                found.append(f"{where}.{key} (added)")
                if fix:
                    del live[key]
        for key, value in saved.items():
            if key not in volatile and live.get(key, MISSING) is not value:
                found.append(f"{where}.{key}")
                if fix:
                    live[key] = value
        return found

    def _class_differences(self, cls, saved, fix):
        found = []
        live = vars(cls)
        where = f"{cls.__module__}.{cls.__qualname__}"
        for key in list(live):
            if key not in saved:
                found.append(f"{where}.{key} (added)")
                if fix:
                    try:
                        self.type_delattr(cls, key)
                    except (AttributeError, TypeError):
                        pass
        for key, value in saved.items():
            if live.get(key, MISSING) is not value:
                found.append(f"{where}.{key}")
                if fix:
                    try:
                        self.type_setattr(cls, key, value)
                    except (AttributeError, TypeError):
                        pass
        return found

    # ------------------------------------------------------------ one test cell's copies

    def hardened_modules(self):
        """{name: module} for every `autograder` module: copies for one test cell."""
        private_builtins = dict(self.builtins)
        frozen = {
            name: types.SimpleNamespace(**{
                k: v for k, v in self.names[name].items() if not k.startswith("__")
            })
            for name in FROZEN_STDLIB if name in self.names
        }
        for name, proxy in frozen.items():
            proxy.__name__ = name
        manager = _private_contextmanager()
        copies, originals = {}, {}
        for name, module in self.modules.items():
            if not policy.kernel_side(name) or name == "autograder.kernel.gradekernel":
                continue
            saved = self.names[name]
            home = vars(module)
            g = {}
            for key, value in saved.items():
                if isinstance(value, types.ModuleType) and value.__name__ in frozen:
                    g[key] = frozen[value.__name__]
                else:
                    g[key] = value
            g["__builtins__"] = private_builtins
            for key, value in saved.items():
                made = self._rebind(value, home, g, manager)
                if made is not None:
                    g[key] = made
                    originals[id(made)] = value
            copy = self.module(name)
            vars(copy).update(g)
            copies[name] = copy
        for name, copy in copies.items():  # packages point at the copies of their modules
            parent, _, child = name.rpartition(".")
            if parent in copies:
                setattr(copies[parent], child, copy)
        return copies, originals

    def _rebind(self, value, home, g, manager):
        if isinstance(value, types.FunctionType) and value.__globals__ is home:
            return self._copy_function(value, g)
        inner = getattr(value, "__wrapped__", None)
        if (isinstance(value, types.FunctionType) and isinstance(inner, types.FunctionType)
                and inner.__globals__ is home and inner.__code__.co_flags & 0x20):
            generator = self._copy_function(inner, g)  # a @contextmanager function

            @functools.wraps(inner)
            def helper(*args, **kwargs):
                return manager(generator(*args, **kwargs))

            return helper
        return None

    def _copy_function(self, f, g):
        copy = self.function(f.__code__, g, f.__name__, f.__defaults__, f.__closure__)
        copy.__kwdefaults__ = f.__kwdefaults__
        copy.__qualname__ = f.__qualname__
        copy.__doc__ = f.__doc__
        copy.__module__ = f.__module__
        copy.__dict__.update(f.__dict__)
        return copy


def _private_contextmanager():
    """A context manager for generator functions (contextlib's semantics), as a class made
    for one test cell: patching contextlib, or an earlier cell's class, changes nothing."""

    class GeneratorContextManager:
        __slots__ = ("gen",)

        def __init__(self, gen):
            self.gen = gen

        def __enter__(self):
            try:
                return next(self.gen)
            except StopIteration:
                raise RuntimeError("generator didn't yield") from None

        def __exit__(self, typ, value, tb):
            if typ is None:
                try:
                    next(self.gen)
                except StopIteration:
                    return False
                raise RuntimeError("generator didn't stop")
            if value is None:
                value = typ()
            try:
                self.gen.throw(value)
            except StopIteration as exc:
                return exc is not value
            except BaseException as exc:
                if exc is value:
                    return False
                raise
            raise RuntimeError("generator didn't stop after throw()")

    return GeneratorContextManager


def private_import(copies, real_import):
    def __import__(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A001
        if level == 0 and name in copies:
            if fromlist:
                copy = copies[name]
                if all(hasattr(copy, x) or f"{name}.{x}" in copies for x in fromlist):
                    return copy
                # a submodule the copies do not hold (the reference run's
                # `from autograder import reference`): the ordinary import, which in a
                # student's sandbox finds nothing of the grader's side
                return real_import(name, globals, locals, fromlist, level)
            top = name.partition(".")[0]
            if top in copies:
                return copies[top]
        return real_import(name, globals, locals, fromlist, level)

    return __import__
