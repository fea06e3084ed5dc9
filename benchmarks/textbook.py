"""The baseline for the engine benchmark: a textbook scalar autograd and microgpt's model on it.

One node per scalar operation, local gradients stored at forward time and a recursive
topological sort, the way micrograd and microgpt build theirs. The model code is plain
Python arithmetic on `Value`s (no fused nodes), so it also runs unchanged on
`microgpt.Value`: that is how the benchmark and the tests check that our engine is a
drop-in replacement.
"""

import math


class TextbookValue:
    """One scalar, one node per operation."""

    __slots__ = ("data", "grad", "_children", "_local_grads")

    def __init__(self, data, children=(), local_grads=()):
        self.data = data
        self.grad = 0
        self._children = children
        self._local_grads = local_grads

    def __add__(self, other):
        other = other if isinstance(other, TextbookValue) else TextbookValue(other)
        return TextbookValue(self.data + other.data, (self, other), (1, 1))

    def __mul__(self, other):
        other = other if isinstance(other, TextbookValue) else TextbookValue(other)
        return TextbookValue(self.data * other.data, (self, other), (other.data, self.data))

    def __pow__(self, k):
        return TextbookValue(self.data**k, (self,), (k * self.data ** (k - 1),))

    def log(self):
        return TextbookValue(math.log(self.data), (self,), (1 / self.data,))

    def exp(self):
        return TextbookValue(math.exp(self.data), (self,), (math.exp(self.data),))

    def relu(self):
        return TextbookValue(max(0, self.data), (self,), (float(self.data > 0),))

    def __neg__(self):
        return self * -1

    def __radd__(self, other):
        return self + other

    def __sub__(self, other):
        return self + (-other)

    def __rsub__(self, other):
        return other + (-self)

    def __rmul__(self, other):
        return self * other

    def __truediv__(self, other):
        return self * other**-1

    def __rtruediv__(self, other):
        return other * self**-1

    def backward(self):
        topo, visited = [], set()

        def build_topo(v):
            if v not in visited:
                visited.add(v)
                for child in v._children:
                    build_topo(child)
                topo.append(v)

        build_topo(self)
        self.grad = 1
        for v in reversed(topo):
            for child, local in zip(v._children, v._local_grads):
                child.grad += local * v.grad


# ---- microgpt's model, written with nothing but the operators above ----

def linear(x, w):
    return [sum(wi * xi for wi, xi in zip(row, x)) for row in w]


def softmax(logits):
    m = max(v.data for v in logits)
    exps = [(v - m).exp() for v in logits]
    total = sum(exps)
    return [e / total for e in exps]


def rmsnorm(x):
    ms = sum(xi * xi for xi in x) / len(x)
    scale = (ms + 1e-5) ** -0.5
    return [xi * scale for xi in x]


def gpt_step(sd, token_id, pos_id, keys, values, n_layer, n_head):
    """Logits for one position, appending this position's keys and values (pre-norm blocks)."""
    x = [t + p for t, p in zip(sd["wte"][token_id], sd["wpe"][pos_id])]
    x = rmsnorm(x)
    hd = len(x) // n_head
    for li in range(n_layer):
        shortcut = x
        x = rmsnorm(x)
        q = linear(x, sd[f"layer{li}.attn_wq"])
        keys[li].append(linear(x, sd[f"layer{li}.attn_wk"]))
        values[li].append(linear(x, sd[f"layer{li}.attn_wv"]))
        heads = []
        for h in range(0, len(x), hd):
            scores = [sum(q[h + j] * k[h + j] for j in range(hd)) / hd**0.5 for k in keys[li]]
            weights = softmax(scores)
            heads.extend(sum(weights[t] * values[li][t][h + j] for t in range(len(weights)))
                         for j in range(hd))
        x = linear(heads, sd[f"layer{li}.attn_wo"])
        x = [a + b for a, b in zip(x, shortcut)]
        shortcut = x
        x = rmsnorm(x)
        x = [v.relu() for v in linear(x, sd[f"layer{li}.mlp_fc1"])]
        x = linear(x, sd[f"layer{li}.mlp_fc2"])
        x = [a + b for a, b in zip(x, shortcut)]
    return linear(x, sd["lm_head"])


def gpt_loss(sd, tokens, n_layer, n_head, block_size):
    """microgpt's loss: the mean of -log p(target) over the positions of one document."""
    n = min(block_size, len(tokens) - 1)
    keys, values = [[] for _ in range(n_layer)], [[] for _ in range(n_layer)]
    losses = []
    for pos in range(n):
        probs = softmax(gpt_step(sd, tokens[pos], pos, keys, values, n_layer, n_head))
        losses.append(-probs[tokens[pos + 1]].log())
    return (1 / n) * sum(losses)


def adam_step(params, m, v, step, num_steps, lr=0.01, beta1=0.85, beta2=0.99, eps=1e-8):
    """microgpt's Adam: bias-corrected, learning rate decaying linearly to 0."""
    lr_t = lr * (1 - step / num_steps)
    for i, p in enumerate(params):
        m[i] = beta1 * m[i] + (1 - beta1) * p.grad
        v[i] = beta2 * v[i] + (1 - beta2) * p.grad**2
        m_hat = m[i] / (1 - beta1 ** (step + 1))
        v_hat = v[i] / (1 - beta2 ** (step + 1))
        p.data -= lr_t * m_hat / (v_hat**0.5 + eps)
        p.grad = 0
