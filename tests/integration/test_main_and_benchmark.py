"""`python -m microgpt` and the train-step benchmark run end to end (as subprocesses)."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

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
    spec = importlib.util.spec_from_file_location("train_step", REPO / "benchmarks/train_step.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr(bench, "LOSS_TOLERANCE", 0.0)  # no difference is small enough
    assert bench.main(["--steps", "1", "--memory-steps", "1", "--data", "census"]) == 1
    out, err = capsys.readouterr()
    assert "DISAGREE" in out and "losses differ" in err
    assert SPEEDUP_LINE.match(out.strip().splitlines()[-1])
