"""Checks for the torch track's graded cells: a student's module or function against the
reference one, on the same weights and inputs, in float64. Each raises
`autograder.checks.CheckFailed` with what was checked, expected against actual."""

import torch

from autograder.checks import CheckFailed

__all__ = ["check_tensor", "check_same_module", "check_numbers"]


def _describe(t):
    t = t.detach()
    flat = t.flatten()
    head = ", ".join(f"{v:.5g}" for v in flat[:3].tolist())
    return f"shape {tuple(t.shape)}, starting [{head}{', ...' if flat.numel() > 3 else ''}]"


def check_tensor(actual, expected, what, rtol=1e-9, atol=1e-9):
    """Fail unless `actual` is a tensor of `expected`'s shape, equal within tolerance."""
    if actual is None:
        raise CheckFailed(f"{what}: expected a tensor, got None. Does the code end with `return`?")
    if not isinstance(actual, torch.Tensor):
        raise CheckFailed(f"{what}: expected a tensor, got a {type(actual).__name__}")
    if actual.shape != expected.shape:
        raise CheckFailed(
            f"{what}: expected a tensor of shape {tuple(expected.shape)}, "
            f"got shape {tuple(actual.shape)}"
        )
    a, e = actual.detach().double(), expected.detach().double()
    if not torch.allclose(a, e, rtol=rtol, atol=atol):
        i = (a - e).abs().argmax()
        raise CheckFailed(
            f"{what}: expected {_describe(e)}; got {_describe(a)}. The largest difference is "
            f"at flat index {i.item()}: expected {e.flatten()[i].item():.6g}, "
            f"got {a.flatten()[i].item():.6g}"
        )


def check_same_module(student, reference, inputs, what, rtol=1e-9, atol=1e-9):
    """`student` and `reference` (modules with the same parameters) on `inputs` (a float64
    tensor): the same output, the same gradient in the input and in every parameter for
    the loss sum(output * fixed random weights)."""
    student.load_state_dict(reference.state_dict())
    outs, grads = [], []
    for module in (student, reference):
        x = inputs.detach().clone().requires_grad_(True)
        module.zero_grad(set_to_none=True)
        y = module(x)
        if not isinstance(y, torch.Tensor):
            kind = "None" if y is None else type(y).__name__
            raise CheckFailed(f"{what}: expected forward to return a tensor, got {kind}")
        outs.append(y)
        if y.requires_grad:
            weights = torch.randn(y.shape, generator=torch.Generator().manual_seed(7),
                                  dtype=y.dtype)
            (y * weights).sum().backward()
        grads.append((x.grad, {n: p.grad for n, p in module.named_parameters()}))
    check_tensor(outs[0], outs[1], f"{what}, the output", rtol, atol)
    if not outs[0].requires_grad:
        raise CheckFailed(f"{what}: the output is not connected to the input and the "
                          f"weights (no graph to backpropagate through)")
    (gx_s, gp_s), (gx_r, gp_r) = grads
    if gx_s is None:
        raise CheckFailed(f"{what}: no gradient reached the input")
    check_tensor(gx_s, gx_r, f"{what}, the gradient at the input", rtol, atol)
    for name, g in gp_r.items():
        if g is None:
            continue
        if gp_s.get(name) is None:
            raise CheckFailed(f"{what}: no gradient reached the parameter {name}")
        check_tensor(gp_s[name], g, f"{what}, the gradient of {name}", rtol, atol)


def check_numbers(actual, expected, what, rtol=1e-9, atol=1e-12):
    """Fail unless `actual` is a list of len(expected) numbers, each close to expected."""
    if not isinstance(actual, (list, tuple)):
        kind = "None" if actual is None else type(actual).__name__
        raise CheckFailed(f"{what}: expected a list of {len(expected)} numbers, got {kind}")
    if len(actual) != len(expected):
        raise CheckFailed(f"{what}: expected a list of {len(expected)} numbers, "
                          f"got {len(actual)}")
    for i, (a, e) in enumerate(zip(actual, expected)):
        try:
            a = float(a)
        except (TypeError, ValueError):
            raise CheckFailed(f"{what}[{i}]: expected a number, got {a!r}") from None
        if not abs(a - e) <= atol + rtol * abs(e):
            raise CheckFailed(f"{what}[{i}]: expected {e:.6g}, got {a:.6g}")
