"""The torch track against microgpt's Value engine: the same small MLP and the same small
transformer, from the same float64 weights, give the same loss and every gradient to 1e-9.
Skipped when torch is absent."""

import pytest

torch = pytest.importorskip(
    "torch", reason="the torch track is an optional extra: pip install -e '.[torch]'"
)

from torchtrack import value_mirror  # noqa: E402
from torchtrack.mlp import make_mlp, teacher_task  # noqa: E402
from torchtrack.transformer import make_lm  # noqa: E402

pytestmark = pytest.mark.torch

TOL = 1e-9


def _flat(x):
    if isinstance(x, list):
        return [v for item in x for v in _flat(item)]
    return [x]


def _jiggle_norms(model, seed):
    """Norm gains and biases away from their 1 and 0, so their gradients are tested too."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))


def assert_close(ours, theirs, what):
    """Every entry within TOL of torch's, relative to the largest of them (and to 1)."""
    ours, theirs = _flat(ours), _flat(theirs)
    assert len(ours) == len(theirs), f"{what}: {len(ours)} entries against {len(theirs)}"
    scale = max([1.0, *(abs(t) for t in theirs)])
    bad = [(i, a, b) for i, (a, b) in enumerate(zip(ours, theirs)) if not abs(a - b) <= TOL * scale]
    assert not bad, f"{what}: {len(bad)} of {len(ours)} differ, e.g. {bad[:3]}"


def compare(model, torch_loss, value_loss_of):
    """Backward in both engines; the losses and every parameter's gradient must agree."""
    model.zero_grad()
    torch_loss.backward()
    P = value_mirror.value_params(model)
    loss = value_loss_of(P)
    loss.backward()
    assert abs(loss.data - torch_loss.item()) <= TOL * max(1.0, abs(torch_loss.item())), (
        f"loss: Value {loss.data!r}, torch {torch_loss.item()!r}"
    )
    ours = value_mirror.grads(P)
    names = [name for name, _ in model.named_parameters()]
    assert sorted(ours) == sorted(names)
    nonzero = 0
    for name, p in model.named_parameters():
        assert_close(ours[name], p.grad.tolist(), f"d loss / d {name}")
        nonzero += int(p.grad.abs().sum() > 0)
    # a gradient test where every gradient is 0 would prove nothing
    assert nonzero >= len(names) - 1


@pytest.mark.parametrize("kind", ["plain", "highway", "residual"])
def test_mlp_loss_and_gradients_match_the_value_engine(kind):
    depth, width, d_in, n_classes = 3, 6, 5, 4
    model = make_mlp(kind, depth, seed=3, width=width, d_in=d_in, n_classes=n_classes).double()
    _jiggle_norms(model, seed=4)
    X, Y = teacher_task(n=7, d_in=d_in, n_classes=n_classes, hidden=8, seed=5)
    X = X.double()
    torch_loss = torch.nn.functional.cross_entropy(model(X), Y)
    compare(model, torch_loss,
            lambda P: value_mirror.mlp_loss(P, kind, depth, X.tolist(), Y.tolist()))


@pytest.mark.parametrize("layout", ["pre", "post", "none"])
def test_transformer_loss_and_gradients_match_the_value_engine(layout):
    vocab, n_layers, n_heads = 7, 2, 2
    model = make_lm(vocab, layout, dim=8, n_layers=n_layers, n_heads=n_heads, seed=11).double()
    _jiggle_norms(model, seed=12)
    g = torch.Generator().manual_seed(13)
    idx = torch.randint(vocab, (2, 5), generator=g)
    targets = torch.randint(vocab, (2, 5), generator=g)
    _, torch_loss = model(idx, targets)
    compare(model, torch_loss,
            lambda P: value_mirror.lm_loss(P, layout, n_layers, n_heads, idx.tolist(),
                                           targets.tolist()))


def test_the_cross_check_notices_a_wrong_model():
    """Control: the mirror of a pre-norm model does not match a post-norm one."""
    model = make_lm(7, "post", dim=8, n_layers=2, n_heads=2, seed=11).double()
    idx = torch.tensor([[1, 2, 3, 4]])
    _, torch_loss = model(idx, idx)
    P = value_mirror.value_params(model)
    loss = value_mirror.lm_loss(P, "pre", 2, 2, idx.tolist(), idx.tolist())
    assert abs(loss.data - torch_loss.item()) > 1e-3
