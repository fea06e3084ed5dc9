"""Checks for the torch track's graded cells: a student's module or function against the
reference one, in float64. Like `autograder.kernel.checks`, each observes first (runs the
student's module and turns what came back into plain data) and lets `witness.settle`
compare: at once in a student's kernel, in the grading process at grading time. A failure
raises `autograder.kernel.checks.CheckFailed` with what was checked, expected against actual.

The reference is passed as a function that builds it (`reference=lambda: ...`), so that
a graded kernel, which never compares, never builds or runs it. A visible test passes the
expected observation instead (`expected=stored_observation(name)`): numbers computed once
from the reference and stored in `torchchecks.json` (`residual-pack stored`), since a
student's install holds no answer of torchtrack's to build the reference from.
"""

import contextlib
import copy
import functools
import json
from pathlib import Path
from typing import Any, Callable, Iterator  # noqa: UP035 (a kernel module imports typing only)

import torch

from autograder.kernel import wire
from autograder.kernel.checks import CheckFailed
from autograder.kernel.compare import MAX_ITEMS, encode
from autograder.kernel.witness import resolve, settle

__all__ = ["check_module", "module_observation", "observe_built",
           "with_moved_norms", "with_bias", "stored_observation", "STORED_FILE", "in_float64",
           "in_kernel"]

# what the visible torch tests compare with (`residual-pack stored`)
STORED_FILE = Path(__file__).resolve().with_name("torchchecks.json")


@functools.cache
def _stored() -> dict[str, Any]:
    return json.loads(STORED_FILE.read_text(encoding="utf-8"))


def stored_observation(name: str) -> Any:
    """The stored entry `name` (an observation or a number), a fresh copy."""
    return copy.deepcopy(_stored()[name])


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run the block with torch's global generator seeded with `seed`, then restore it."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


@contextlib.contextmanager
def in_float64() -> Iterator[None]:
    """Run the block with float64 as torch's default dtype, then restore the one before.
    A stored training run is made and rerun this way: in float32 its last digits move
    from one machine to another by more than the checks can allow."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def _tensor_data(t: Any) -> list[float | str]:
    t = t.detach().double().flatten()
    if t.numel() > MAX_ITEMS:
        raise CheckFailed(f"a tensor of {t.numel()} numbers is too large to check")
    return [encode(v) for v in t.tolist()]


def module_observation(module: Any, inputs: Any, what: str) -> dict[str, Any]:
    """`module` on `inputs`: its output, then the gradients in the input and in every
    parameter of the loss sum(output * fixed random weights), as named tensors."""
    x = inputs.detach().clone().requires_grad_(True)
    module.zero_grad(set_to_none=True)
    y = module(x)
    if not isinstance(y, torch.Tensor):
        kind = "None" if y is None else type(y).__name__
        return {"problem": f"{what}: expected forward to return a tensor, got {kind}"}
    seen = [["the output", {"shape": list(y.shape), "data": _tensor_data(y)}]]
    if not y.requires_grad:
        return {"problem": f"{what}: the output is not connected to the input and the "
                           f"weights (no graph to backpropagate through)"}
    weights = torch.randn(y.shape, generator=torch.Generator().manual_seed(7), dtype=y.dtype)
    # the gradients read below come from this backward() alone, not from a forward pass
    # that wrote into .grad (hooks that change a gradient are flagged for review at intake)
    x.grad = None
    module.zero_grad(set_to_none=True)
    (y * weights).sum().backward()
    if x.grad is None:
        return {"problem": f"{what}: no gradient reached the input"}
    seen.append(["the gradient at the input", {"shape": list(x.grad.shape),
                                               "data": _tensor_data(x.grad)}])
    for name, p in sorted(module.named_parameters()):
        if p.grad is not None:
            seen.append([f"the gradient of {name}", {"shape": list(p.grad.shape),
                                                     "data": _tensor_data(p.grad)}])
    return {"tensors": seen}


def in_kernel(function: Callable[..., Any], *args: Any, float64: bool = False,
              **kwargs: Any) -> Any:
    """`function(*args, **kwargs)` (a function of the library) run where the student's
    objects live, in float64 as torch's default dtype when `float64`: in JupyterLab, right
    here; at grading time, when the test runs in the grader, in the student's kernel, and
    what it returns (numbers, tensors) comes back as data. A training run's loss is made
    this way: the grader cannot make it again, and compares it with the reference run's."""
    remote = wire.REMOTE
    if remote is not None:
        return remote.run_in_kernel(_called, function, float64, args, kwargs)
    return _called(function, float64, args, kwargs)


def _called(function: Callable[..., Any], float64: bool, args: tuple[Any, ...],
            kwargs: dict[str, Any]) -> Any:
    if float64:
        with in_float64():
            return function(*args, **kwargs)
    return function(*args, **kwargs)


def _remote(*objects: object) -> Any:
    """The grader's connection, when one of `objects` is the student's (at grading time)."""
    remote = wire.REMOTE
    if remote is not None and any(remote.is_proxy(o) for o in objects):
        return remote
    return None


def observe_built(make: Callable[[], Any], inputs: Any, what: str,
                  seed: int) -> dict[str, Any]:
    """The observation of the module `make()` builds under `seeded(seed)` (see
    `module_observation`)."""
    with seeded(seed):
        module = make()
    return module_observation(module, inputs, what)


def check_module(make: Callable[[], Any], inputs: Any, what: str,
                 reference: Callable[[], Any] | None = None, seed: int = 0,
                 rtol: float = 1e-9, atol: float = 1e-9, expected: Any = None) -> Any:
    """The module `make()` builds (under `seeded(seed)`) gives the output and the
    gradients of the one `reference()` builds under the same seed, on `inputs` (or, with
    `expected`, the stored observation of that reference). The student's module is built
    and run where the student's code lives (`in_kernel`)."""
    observed = in_kernel(observe_built, make, inputs, what, seed)

    def reference_observation() -> Any:
        if expected is not None:
            return resolve(expected)
        with seeded(seed):
            built = reference()  # type: ignore[misc]  # given when `expected` is not
        return module_observation(built, inputs, "the reference")

    params = {"what": what, "rtol": rtol, "atol": atol}
    return settle("tensors", observed, reference_observation, params)


def with_bias(layer: Any, value: float) -> Any:
    """`layer` with its linear map's bias set to `value` everywhere (many ReLUs active)."""
    remote = _remote(layer)
    if remote is not None:
        return remote.run_in_kernel(with_bias, layer, value)
    with torch.no_grad():
        layer.linear.bias.fill_(value)
    return layer


def with_moved_norms(block: Any, seed: int) -> Any:
    """`block` with its two norm gains moved away from 1 (so that norm1 and norm2 cannot
    stand in for each other), the same way for every block made with the same seed."""
    remote = _remote(block)
    if remote is not None:
        return remote.run_in_kernel(with_moved_norms, block, seed)
    g = torch.Generator().manual_seed(seed)
    dim = block.norm1.weight.shape[0]
    dtype = block.norm1.weight.dtype
    with torch.no_grad():
        block.norm1.weight.add_(0.5 * torch.randn(dim, generator=g, dtype=dtype))
        block.norm2.weight.add_(0.5 * torch.randn(dim, generator=g, dtype=dtype))
    return block
