"""`python -m microgpt` and the train-step benchmark run end to end (as subprocesses)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from benchmarkparts import load_benchmark

REPO = Path(__file__).resolve().parents[2]
SPEEDUP_LINE = re.compile(r"^speedup \(train step, vs textbook engine\): \d+\.\dx$")


def _run(*args, timeout=300):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_python_m_microgpt_trains_and_samples():
    r = _run("-m", "microgpt", "--steps", "3", "--samples", "2", "--no-progress")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "num docs: 5163" in out
    assert "vocab size: 27" in out
    assert "num params: 4192" in out
    assert re.search(r"mean loss, steps 1-3: \d+\.\d+", out)
    samples = re.findall(r"^sample +(\d+): ([a-z]*)$", out, flags=re.M)
    assert [i for i, _ in samples] == ["1", "2"]
    assert "training" not in r.stderr  # --no-progress: no bar


def test_python_m_microgpt_bad_data_path_is_a_clear_error(tmp_path):
    r = _run("-m", "microgpt", "--data", str(tmp_path / "missing.txt"), "--steps", "1")
    assert r.returncode == 2
    assert "no such file" in r.stderr


def test_benchmark_runs_and_the_engines_agree():
    r = _run("benchmarks/train_step.py", "--steps", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.strip().splitlines()
    agree = [line for line in lines if line.startswith("losses:")]
    assert len(agree) == 1 and "(agree," in agree[0]
    diff = float(re.search(r"= ([0-9.e+-]+) \(agree", agree[0]).group(1))
    assert diff < 1e-9
    assert SPEEDUP_LINE.match(lines[-1]), lines[-1]


def test_benchmark_exits_non_zero_when_the_losses_disagree(monkeypatch, capsys):
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script adds benchmarks/ to it
    bench = load_benchmark("train_step")
    monkeypatch.setattr(bench, "LOSS_TOLERANCE", 0.0)  # no difference is small enough
    assert bench.main(["--steps", "1", "--memory-steps", "1", "--data", "census"]) == 1
    out, err = capsys.readouterr()
    assert "DISAGREE" in out and "losses differ" in err
    assert SPEEDUP_LINE.match(out.strip().splitlines()[-1])


# ---- microgpt's own script on our Value (benchmarks/microgpt_script.py) ----

SHARED_SCRIPT = REPO.parent / "shared" / "data" / "microgpt.py"
SCRIPT_SPEEDUP_LINE = re.compile(
    r"^speedup \(microgpt's script on our Value, collector on / off\): "
    r"\d+\.\d\dx / \d+\.\d\dx$"
)

# A stand-in for microgpt's script, written for this test: a top-level `class Value` of
# the textbook kind, a training loop that prints a `step` line per step, its loss in the
# global `loss`. `{scale}` changes the class's arithmetic for the control below.
STAND_IN = '''
import random
rng = random.Random(3)


class Value:
    def __init__(self, data, children=(), local_grads=()):
        self.data, self.grad = data, 0
        self._children, self._local_grads = children, local_grads

    def __add__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        return Value(self.data + other.data, (self, other), (1, 1))

    def __mul__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        return Value(self.data * other.data, (self, other), (other.data * {scale}, self.data))

    __radd__ = __add__
    __rmul__ = __mul__

    def __pow__(self, k):
        return Value(self.data ** k, (self,), (k * self.data ** (k - 1),))

    def backward(self):
        order, done = [], set()

        def visit(node):
            if node not in done:
                done.add(node)
                for c in node._children:
                    visit(c)
                order.append(node)

        visit(self)
        self.grad = 1
        for node in order[::-1]:
            for c, d in zip(node._children, node._local_grads):
                c.grad += d * node.grad


w = [Value(rng.gauss(0, 1)) for _ in range(5)]
for step in range(50):
    x = [rng.random() for _ in range(5)]
    loss = (sum(a * b for a, b in zip(w, x)) + -1.5) ** 2
    loss.backward()
    for p in w:
        p.data -= 0.05 * p.grad
        p.grad = 0
    print(f"step {{step + 1}} | loss {{loss.data:.4f}}", end="\\r")
'''


def _script_bench():
    return load_benchmark("microgpt_script")


def test_the_swap_replaces_the_value_class_and_nothing_else():
    bench = _script_bench()
    source = STAND_IN.format(scale=1)
    swapped = bench.swapped_source(source, "ours")
    assert "class Value" not in swapped and bench.OUR_VALUE in swapped
    assert swapped.count("\n") == source.count("\n")  # the script's own line numbers
    before, after = source.split("class Value")[0], source.split("w = [Value")[1]
    assert swapped.startswith(before) and swapped.endswith(after)
    assert bench.swapped_source(source, "theirs") == source


def test_the_script_benchmark_finds_the_same_losses_on_both_values(tmp_path):
    script, data = tmp_path / "stand_in.py", tmp_path / "names.txt"
    script.write_text(STAND_IN.format(scale=1))
    data.write_text("emma\nava\n")
    r = _run("benchmarks/microgpt_script.py", "--script", str(script), "--data", str(data),
             "--steps", "7", "--pairs", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "identical to the last bit in every run" in r.stdout
    assert SCRIPT_SPEEDUP_LINE.match(r.stdout.strip().splitlines()[-1])


def test_the_script_benchmark_fails_when_a_loss_differs_in_the_last_bit(tmp_path):
    """Control: a class whose product rule is off by one part in 1e15 gives other losses."""
    script, data = tmp_path / "stand_in.py", tmp_path / "names.txt"
    script.write_text(STAND_IN.format(scale="(1 + 1e-15)"))
    data.write_text("emma\n")
    r = _run("benchmarks/microgpt_script.py", "--script", str(script), "--data", str(data),
             "--steps", "7", "--pairs", "1")
    assert r.returncode == 1
    assert "DIFFERENT LOSSES" in r.stdout and "losses: DIFFERENT" in r.stdout


@pytest.mark.skipif(not SHARED_SCRIPT.is_file(), reason=f"no microgpt.py at {SHARED_SCRIPT}")
def test_microgpts_own_script_gives_the_same_losses_on_our_value():
    r = _run("benchmarks/microgpt_script.py", "--steps", "2", "--pairs", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "num params: 4192" in r.stdout
    assert "identical to the last bit in every run" in r.stdout
