"""`kernel/wire.py`, `kernel/agent.py`, `grading/remote.py`: a graded test's calls of the
student's code, over a real socket pair, with the kernel's end (`KernelPeer.serve`) in a
thread of its own holding the "notebook's" names. What comes back is the grader's own:
a Value is made again from the engine's operations, or refused."""

import json
import math
import random
import socket
import struct
import threading

import pytest

from autograder.grading.remote import KernelProxy, Session, run_test
from autograder.kernel import crash
from autograder.kernel.agent import KernelPeer
from autograder.kernel.wire import UnverifiedValue, WireError
from microgpt import Value, dot, linear, nn


@pytest.fixture
def kernel():
    """(session, the kernel's namespace): the grader's end, and the names it can reach."""
    ours, theirs = socket.socketpair()
    namespace = {}
    peer = KernelPeer(theirs, namespace)
    thread = threading.Thread(target=peer.serve, daemon=True)
    thread.start()
    session = Session(ours)
    yield session, namespace
    session.end()
    thread.join(5)
    ours.close()
    theirs.close()


def _fused_everything(x, y):
    """Every operation of the engine, fused ones with their extra arguments included."""
    a = x * y + 1.5 - x / 2.0
    b = (a ** 3).tanh() + a.exp().log() + a.relu() + a.sigmoid() + (-a)
    s = Value.sum([a, 2.0, b, 0.25])  # plain numbers among the children
    d = dot([x, 0.5, y], [y, x, 3.0])  # a dot with numbers on both sides
    row = linear([a, b], [[x, y], [y, x]])
    norm = nn.rmsnorm([a, b, s], eps=1e-3)
    lay = nn.layernorm([a, b, s, d])
    p = nn.softmax([a, b, s])
    lp = nn.log_softmax([d, s])
    ce = nn.cross_entropy([a, b, d], 2)
    return Value.sum([s, d, *row, *norm, *lay, *p, *lp, ce]) * 0.1


def test_a_value_from_the_kernel_is_made_again_and_differentiated_here(kernel):
    session, namespace = kernel
    namespace["f"] = _fused_everything
    x, y = Value(0.7), Value(-0.4)
    out = session.get("f")(x, y)
    assert isinstance(out, Value) and not isinstance(out, KernelProxy)
    out.backward()
    mx, my = Value(0.7), Value(-0.4)
    mine = _fused_everything(mx, my)
    mine.backward()
    assert out.data == mine.data
    assert (x.grad, y.grad) == (mx.grad, my.grad)  # the grader's own backward, the same sums


def test_a_node_made_by_hand_is_refused(kernel):
    session, namespace = kernel
    namespace["f"] = lambda x: Value(6.7275, (x,), (6.7275,))  # micrograd style, by hand
    with pytest.raises(UnverifiedValue, match="made by hand"):
        session.get("f")(Value(1.0))


def test_a_node_whose_data_is_not_what_its_operation_gives_is_refused(kernel):
    session, namespace = kernel

    def f(x):
        out = x * 2
        out.data = 6.7275  # the right number written into a node of the wrong graph
        return out

    namespace["f"] = f
    with pytest.raises(UnverifiedValue, match="children give 2.0"):
        session.get("f")(Value(1.0))


@pytest.mark.parametrize("forge", ["sum's data", "product relabelled a sum", "exponent"])
def test_a_node_of_plus_times_or_power_whose_parts_were_rewritten_is_refused(kernel, forge):
    """`+` and `*` are made again on a path of their own (most nodes are theirs)."""
    session, namespace = kernel

    def f(x):
        if forge == "sum's data":
            out = x + 1.0
            out.data = 6.7275
        elif forge == "product relabelled a sum":
            out = x * 2.0
            out._op = "+"  # 5.0 by the grader's engine, 6.0 in the node
        else:
            out = x ** 2
            out._db = 3  # the exponent the grader makes the node with: 27.0, not 9.0
        return out

    namespace["f"] = f
    with pytest.raises(UnverifiedValue, match="children give"):
        session.get("f")(Value(3.0))


def test_the_numbers_of_a_refused_messages_first_nodes_stay_taken():
    """A message refused at its third node (an unknown child) has named two leaves; a later
    message that numbers its nodes from 1 again would take over their names, and with a
    leaf's update ("s") rewrite a checked node's data (found in review, 2026-12-06)."""
    refused = {"n": [["", 1.0, []], ["", 2.0, []], ["+", 3.0, [1, 99]]], "f": 1, "ok": None}
    again = {"n": [["+", 3.0, [1, 2]]], "f": 1, "ok": {"V": 1}}
    session = _raw_kernel([json.dumps(refused).encode(), json.dumps(again).encode()])
    with pytest.raises(WireError, match="child 99"):
        session.request("get", name="f")
    with pytest.raises(WireError, match="not after the last one taken"):
        session.request("get", name="g")


@pytest.mark.parametrize("reply", [
    {"n": [["", 1.0, []], ["+", {"X": ["float64", [2], [1.0, 2.0]]}, [1, 1]]], "f": 1,
     "ok": None},  # a tensor as a node's claimed data: its truth cannot be told
    {"n": [["", 2.0, [], 10 ** 400], ["*", 4.0, [1, 1]]], "f": 1, "ok": None},  # a grad
])
def test_claimed_data_and_grads_that_break_a_comparison_or_a_backward_are_refused(reply):
    session = _raw_kernel([json.dumps(reply).encode()])
    with pytest.raises(WireError):
        session.request("get", name="f")


@pytest.mark.parametrize("nodes, refusal", [
    # a string leaf: `*` would repeat it in the grader's memory ("ab" * 3 here)
    ([["", "ab", []], ["", 3, []], ["*", "ababab", [1, 2]]], "is a str, not a number"),
    ([["", {"L": [1.0]}, []]], "is a dict, not a number"),  # a tagged list
    # an array: only a small flat one (`MAX_LEAF_ARRAY` items), whose nodes stay as small
    ([["", {"A": ["float64", [17], [1.0] * 17]}, []]], "is a dict, not a number"),
    ([["", {"A": ["float64", [2, 1], [1.0, 2.0]]}, []]], "is a dict, not a number"),
    ([["", 2 ** 70, []]], "integer of more than 64 bits"),
    # an integer within 64 bits squared: each node's data is bounded, not only the leaves'
    ([["", 2 ** 40, []], ["*", 2 ** 80, [1, 1]]], "integer of more than 64 bits"),
    ([["", 3, []], ["**", 0, [1], 0, 10 ** 6]], "more than this end computes"),
])
def test_what_the_grader_would_compute_without_bound_is_refused(nodes, refusal):
    """The grader makes every node again from its leaves: a kernel's leaf is a number, and
    no node's integer grows past 64 bits, so no message makes the grader compute without
    bound."""
    reply = {"n": nodes, "f": 1, "ok": {"V": len(nodes)}}
    session = _raw_kernel([json.dumps(reply).encode()])
    with pytest.raises(WireError, match=refusal):
        session.request("get", name="f")


def test_a_value_made_from_a_small_numpy_array_reaches_the_check_as_the_array():
    """A known mistake, `Value(np.array([x]))`: the check says what the Value holds, as in
    a student's kernel, instead of the session breaking (issue 42, item 7)."""
    import numpy as np

    reply = {"n": [["", {"A": ["float64", [1], [2.0]]}, []],
                   ["*", {"A": ["float64", [1], [4.0]]}, [1, 1]]], "f": 1, "ok": {"V": 2}}
    session = _raw_kernel([json.dumps(reply).encode()])
    out = session.request("get", name="f")
    leaf = out._children[0]  # x * x: the same leaf twice
    assert isinstance(leaf.data, np.ndarray) and leaf.data.tolist() == [2.0]
    assert out.data.tolist() == [4.0]  # made again here, from the leaf


def test_nodes_numbered_again_are_refused():
    """A node takes the next number of its end; a message that numbers nodes from one
    already taken would make a name stand for two Values."""
    node = {"n": [["", 1.0, []]], "f": 1, "ok": {"V": 1}}
    session = _raw_kernel([json.dumps(node).encode()] * 2)
    assert session.request("get", name="f").data == 1.0
    with pytest.raises(WireError, match="not after the last one taken"):
        session.request("get", name="g")


def test_local_gradients_written_into_a_node_do_not_count(kernel):
    session, namespace = kernel

    def f(x):
        out = x * 2
        out._da = 6.7275  # a forged derivative: the grader's node has its own
        return out

    namespace["f"] = f
    x = Value(1.0)
    session.get("f")(x).backward()
    assert x.grad == 2


def test_what_the_students_backward_leaves_on_a_leaf_comes_back(kernel):
    session, namespace = kernel

    def f(params):
        (params[0] * 3 + params[1]).backward()
        params[1].data += 1  # and a change of a parameter, as an update would make

    namespace["f"] = f
    params = [Value(2.0), Value(5.0)]
    session.get("f")(params)
    assert [p.grad for p in params] == [3, 1]
    assert params[1].data == 6.0


def test_the_graders_function_is_called_back_and_may_call_the_kernel_again(kernel):
    session, namespace = kernel
    namespace["double"] = lambda v: v * 2
    namespace["stack"] = lambda layer, v, depth: v if depth == 0 else \
        namespace["stack"](layer, v + layer(v), depth - 1)
    double = session.get("double")

    def layer(v):  # the test's layer: runs here, and calls the student's code itself
        return double(v).tanh()

    x = Value(0.3)
    out = session.get("stack")(layer, x, 3)
    out.backward()
    h, mx = Value(0.3), None
    mx = h
    for _ in range(3):
        h = h + (h * 2).tanh()
    h.backward()
    assert (out.data, x.grad) == (h.data, mx.grad)


def test_an_error_of_the_students_code_comes_back_as_its_kind_with_its_lines(kernel):
    session, namespace = kernel

    def f(x):
        return x.data[0]

    namespace["f"] = f
    with pytest.raises(TypeError, match="not subscriptable") as caught:
        session.get("f")(Value(1.0))
    assert caught.value.kernel_lines[0].startswith("TypeError")


def test_an_error_of_a_kind_of_the_kernels_own_reads_and_is_named_as_in_the_kernel(
        kernel, monkeypatch):
    """An error whose kind is not Python's own (the library's CheckFailed, NotReleased) is,
    in the grader, of a class named as the kernel's kind, with the kernel's message: it
    reads "Kind: message" once (it read "CheckFailed: CheckFailed: ..." before), and the
    test's `task` fingerprints it as a student's kernel does, so a known mistake that
    raises it is named in the graded notebook too (05's "calls the model's own block"
    was not: results/grading/diagnosis-paths-2026-12-06.txt)."""
    from autograder.kernel import diagnosis
    from autograder.kernel.checks import task
    from autograder.kernel.witness import CheckFailed

    session, namespace = kernel

    def f(x):
        raise CheckFailed("your block called model.block")

    namespace["f"] = f
    with pytest.raises(Exception) as graded:
        session.get("f")(Value(1.0))
    assert type(graded.value).__name__ == "CheckFailed" and graded.value.kind == "CheckFailed"
    assert f"{type(graded.value).__name__}: {graded.value}" == \
        "CheckFailed: your block called model.block"
    key = diagnosis.fingerprint(diagnosis.RAISED, "Task 5.1",
                                {diagnosis.RAISED: "CheckFailed: your block called model.block"})
    monkeypatch.setattr(diagnosis, "_KNOWN", {key: ["the library's own block."]})
    with pytest.raises(Exception) as caught:  # as the graded test cell runs it
        with task("Task 5.1"):
            session.get("f")(Value(1.0))
    assert "This looks like a known mistake: the library's own block." in \
        " ".join(getattr(caught.value, "__notes__", []))
    with pytest.raises(CheckFailed) as kernel_side:  # as a student's kernel runs it
        with task("Task 5.1"):
            f(Value(1.0))
    assert "the library's own block." in str(kernel_side.value)


def test_what_the_students_code_changes_in_a_list_or_generator_comes_back(kernel):
    session, namespace = kernel

    def f(layers, rng):
        layers.pop()
        layers[0]["W"] = [Value(rng.random())]

    namespace["f"] = f
    layers = [{"W": [Value(1.0)]}, {"W": [Value(2.0)]}]
    rng, twin = random.Random(5), random.Random(5)
    session.get("f")(layers, rng)
    assert len(layers) == 1 and layers[0]["W"][0].data == twin.random()
    assert rng.random() == twin.random()  # the generator's state came back too


def test_a_missing_name_is_a_key_error_with_what_the_kernel_said(kernel):
    session, namespace = kernel
    namespace["residual_stak"] = lambda x: x
    try:
        with pytest.raises(KeyError):
            session.get("residual_stack")
        assert crash.ABSENT["residual_stack"].get("like") == "residual_stak"
    finally:
        crash.ABSENT.clear()


def test_a_graded_test_names_the_notebooks_name_like_a_missing_one():
    """The kernel's word on a missing name reaches the test's `task`, which runs in the
    grader: a misspelt `def` is said as in JupyterLab, not "run the cells above"."""
    ours, theirs = socket.socketpair()
    peer = KernelPeer(theirs, {"residual_stak": lambda x, depth=20: x})
    thread = threading.Thread(target=peer.serve, daemon=True)
    thread.start()
    source = ("from autograder.kernel.checks import check_value, task\n"
              "with task('Task 1.1'):\n"
              "    check_value(residual_stack(1.0), 1.0, what='x')\n")
    try:
        outcome = run_test(ours, source, "<graded test cell t>", "witness")
    finally:
        thread.join(5)
        ours.close()
        theirs.close()
    assert outcome.error[0] == "NotAnswered", outcome.error
    assert "your notebook defines 'residual_stak': is the name misspelt there?" in \
        outcome.error[1], outcome.error


def test_a_proxy_reads_a_namespace_by_name_and_writes_into_it(kernel):
    session, namespace = kernel

    def stack(x):
        return layer(x)  # noqa: F821 (the notebook's name, looked up when called)

    namespace["stack"] = stack
    stack.__globals__["layer"] = lambda v: v * 3
    space = session.get("stack").__globals__
    kept = space["layer"]
    space["layer"] = lambda v: v * 5  # the test's own layer, called back
    x = Value(1.0)
    assert session.get("stack")(x).data == 5.0
    space["layer"] = kept
    assert session.get("stack")(x).data == 3.0


def _raw_kernel(replies):
    """A kernel that answers every request with the next of `replies` (raw bytes)."""
    ours, theirs = socket.socketpair()

    def serve():
        for raw in replies:
            size = struct.unpack("!Q", theirs.recv(8))[0]
            theirs.recv(size)
            theirs.sendall(struct.pack("!Q", len(raw)) + raw)

    threading.Thread(target=serve, daemon=True).start()
    return Session(ours)


@pytest.mark.parametrize("reply", [
    b"not json", b"[1, 2]", b'{"ok": [1, 2]}', b'{"ok": {"V": "k404"}}',
    b'{"ok": {"F": "os:system"}}', b'{"ok": {"TM": "gASV"}}', b'{"ok": {"M": "k1"}}',
    b'{"ok": {"V": 404}}', b'{"ok": {"V": true}}',
    json.dumps({"n": [["+", 1.0, [9, 9]]], "f": 1, "ok": None}).encode(),
    json.dumps({"n": [["", 1.0, []], ["+", 2.0, ["k1", 1]]], "f": 1, "ok": None}).encode(),
    json.dumps({"n": [["", 1.0, []], ["+", 2.0, [[1], 1]]], "f": 1, "ok": None}).encode(),
    json.dumps({"n": [["", 1.0, []], ["+", 2.0, [1.0, 1]]], "f": 1, "ok": None}).encode(),
    json.dumps({"n": [["", 1.0, []], ["sum", 2.0, [1, {}]]], "f": 1, "ok": None}).encode(),
    json.dumps({"n": [["+", 1.0]], "f": 1, "ok": None}).encode(),
    json.dumps({"n": [["", 1.0, [], 0, None, 7]], "f": 1, "ok": None}).encode(),
    json.dumps({"n": [[1.0, "", []]], "f": 1, "ok": None}).encode(),
    json.dumps({"s": [[-1, 1.0, 0.0]], "ok": None}).encode(),
    json.dumps({"s": [["g1", 1.0, 0.0]], "ok": None}).encode(),
    json.dumps({"n": [["", 1.0, []]], "ok": None}).encode(),  # nodes with no first number
    json.dumps({"n": [["", 1.0, []]], "f": 0, "ok": None}).encode(),
    json.dumps({"n": [["", 1.0, []]], "f": -1, "ok": None}).encode(),
    json.dumps({"n": [["", 1.0, []]], "f": "1", "ok": None}).encode(),
])
def test_a_malformed_answer_is_an_error_of_the_call_never_code_run_here(reply):
    session = _raw_kernel([reply])
    with pytest.raises(WireError):
        session.request("get", name="f")


def test_a_library_function_of_the_kernel_stays_the_kernels(kernel):
    """`mlp_logits = deepnet.logits` in a notebook: the grader calls the kernel's copy
    (whose answers are taken out while grading), never its own library's."""
    session, namespace = kernel
    namespace["mlp_logits"] = nn.softmax
    got = session.get("mlp_logits")
    assert isinstance(got, KernelProxy)
    assert [round(p.data, 6) for p in got([Value(0.0), Value(0.0)])] == [0.5, 0.5]


@pytest.mark.parametrize("tag", [{"F": "microgpt.nn:softmax"},
                                 {"B": [{"L": []}, "append"]},
                                 {"O": ["microgpt.deepnet:Net", {"D": []}], "m": "g1"}])
def test_a_library_name_or_object_from_the_kernel_is_refused(tag):
    session = _raw_kernel([json.dumps({"ok": tag}).encode()])
    with pytest.raises(WireError):
        session.request("get", name="f")
    assert math.isfinite(1.0)


def test_a_kernel_that_closes_the_connection_is_gone_not_a_broken_message():
    """A kernel that ends mid-test (killed, or its process exits) is `KernelGone` (the cell
    is lost to the kernel, said so), told apart from a malformed answer by its kind."""
    from autograder.grading.remote import KernelGone

    ours, theirs = socket.socketpair()

    def read_then_close():
        size = struct.unpack("!Q", theirs.recv(8))[0]
        theirs.recv(size)
        theirs.close()

    threading.Thread(target=read_then_close, daemon=True).start()
    with pytest.raises(KernelGone, match="closed the connection"):
        Session(ours).request("get", name="f")
    ours.close()


def test_a_list_sent_again_carries_the_graders_changes_of_its_leaves(kernel):
    """A model's parameters go once; on each later call only what the grader changed in
    them goes (`Peer.sync_items`): an update between two calls, a nan, a new node put in
    place of a leaf, and a nested list all reach the kernel."""
    session, namespace = kernel
    namespace["total"] = lambda ps: sum(x for x in (getattr(p, "data", p) for p in ps)
                                        if x == x)
    namespace["grads"] = lambda ps: [getattr(p, "grad", None) for p in ps]
    namespace["nested"] = lambda rows: [[p.data for p in row] for row in rows]
    total, grads, nested = (session.get(n) for n in ("total", "grads", "nested"))
    params = [Value(1.0), Value(2.0), 3.0]
    assert total(params) == 6.0
    params[0].data = 10.0  # an update made by the test, between two calls
    params[1].grad = 0.5
    assert total(params) == 15.0 and grads(params)[:2] == [0.0, 0.5]
    params[1].data = float("nan")
    assert total(params) == 13.0
    params[0] = params[0] * 2  # a node the kernel has not seen, in the same list
    assert total(params) == 23.0
    rows = [[Value(1.0)], [Value(2.0)]]
    assert nested(rows) == [[1.0], [2.0]]
    rows[1][0].data = 7.0
    assert nested(rows) == [[1.0], [7.0]]


def _sent(session, call):
    """The messages the grader sends while `call()` runs, as JSON text."""
    sent, send = [], session._send
    session._send = lambda message: (sent.append(json.dumps(message, separators=(",", ":"))),
                                      send(message))[1]
    try:
        return call(), sent
    finally:
        session._send = send


def test_a_model_sent_again_goes_as_its_name_with_only_the_leaves_that_changed(kernel):
    """A library object (a model) goes whole once; while its lists and rows hold the same,
    a later call sends its name ("S") and the leaves the grader changed, and the kernel
    works on its copy with them; a row the test replaces sends it whole again."""
    from microgpt import GPT

    session, namespace = kernel
    namespace["first"] = lambda m: [row[0].data for row in m.state_dict["wte"][:2]]
    first = session.get("first")
    model = GPT(seed=0, n_embd=4, n_head=1, vocab_size=3, block_size=2)
    assert first(model) == [model.state_dict["wte"][0][0].data,
                            model.state_dict["wte"][1][0].data]
    model.state_dict["wte"][1][0].data = 5.0  # an update between two calls
    value, sent = _sent(session, lambda: first(model))
    assert value[1] == 5.0
    assert '"S":' in sent[0] and '"O":' not in sent[0]  # the name, not the model again
    assert json.loads(sent[0])["s"] == [[json.loads(sent[0])["s"][0][0], 5.0, 0]]  # one leaf
    model.state_dict["wte"][0] = [Value(9.0)] + model.state_dict["wte"][0][1:]
    value, sent = _sent(session, lambda: first(model))
    assert value == [9.0, 5.0] and '"O":' in sent[0]  # a row replaced: whole again


def test_a_leaf_goes_as_the_walk_of_a_graph_would_send_it():
    """`Peer._send_leaf`, the short path of a plain leaf (a model's weight), queues what
    `_send_graph` queues for it, names it the same and records it as a shared leaf, on both
    ends; a Value with children, or of a class of its own, takes the walk."""
    import numpy as np

    from autograder.grading.remote import GraderPeer

    leaves = [Value(0.5), Value(3), Value(-0.0), Value(float("nan")), Value(np.float64(2.0)),
              Value(np.array([1.0, 2.0]))]
    leaves[0].grad, leaves[1].grad = 0.25, 0
    for make in (lambda sock: KernelPeer(sock, {}), lambda sock: GraderPeer(sock, None)):
        ours, theirs = socket.socketpair()
        short, walk = make(ours), make(theirs)
        for leaf in leaves:
            assert short._value(leaf) == {"V": walk._send_graph(leaf)}
        assert json.dumps(short.message()) == json.dumps(walk.message())
        assert short.leaves == walk.leaves and short.touched == walk.touched
        ours.close()
        theirs.close()
    made = leaves[0] * 2.0
    peer = KernelPeer(socket.socketpair()[0], {})
    peer._send_leaf = None  # not taken for a node with children
    assert peer._value(made) == {"V": 3} and len(peer.message()["n"]) == 3  # 0.5, 2.0, *


def test_the_kernel_stops_taking_a_model_as_the_same_when_a_list_in_it_comes_again():
    """The kernel's copy of a model sent whole, then by name ("S"), is kept with its rows;
    a row of it that comes again by value (or changes in the kernel) drops that copy, and
    only that one: the next "S" looks at the model's rows anew (`KernelPeer.in_wholes`, the
    index from a row to the models that hold it)."""
    from microgpt import GPT

    ours, theirs = socket.socketpair()
    peer = KernelPeer(theirs, {"first": lambda *models: len(models)})
    thread = threading.Thread(target=peer.serve, daemon=True)
    thread.start()
    session = Session(ours)
    try:
        first = session.get("first")
        one, two = (GPT(seed=s, n_embd=4, n_head=1, vocab_size=3, block_size=2)
                    for s in (0, 1))
        assert first(one, two) == 2 and first(one, two) == 2  # whole, then by name
        known = session.peer._known
        names = [known(one), known(two)]
        assert sorted(peer.wholes) == sorted(names)
        row = known(one.state_dict["wpe"][1])
        assert row is not None and names[0] in peer.in_wholes[row]
        peer._forget_wholes(row)
        assert list(peer.wholes) == [names[1]]
        assert all(names[0] not in held for held in peer.in_wholes.values())
        peer._forget_wholes(names[1])  # the model itself
        assert peer.wholes == {} and peer.in_wholes == {}
        assert first(one, two) == 2  # taken again from its rows
        assert sorted(peer.wholes) == sorted(names)
    finally:
        session.end()
        thread.join(5)
        ours.close()
        theirs.close()


def test_what_the_students_code_changes_in_a_model_comes_back_and_its_caches_stay_its_own(
        kernel):
    """A leaf the student's code changes in the kernel's copy comes back to the grader's
    model (and the copy is still taken as the same); a list it replaces comes back and the
    model goes whole next time; a private attribute (a cache such as `_weight_numbers`,
    whose numbers the model's own code trusts) is never taken from the kernel."""
    from microgpt import GPT

    session, namespace = kernel

    def meddle(m, what):
        if what == "leaf":
            m.state_dict["wpe"][0][0].data = 4.0
        elif what == "row":
            m.state_dict["wpe"][1] = [Value(3.0)] * len(m.state_dict["wpe"][1])
        else:
            m._weight_numbers = {"lm_head": ([[1e6] * 4] * 3, True)}
        return m.state_dict["wpe"][1][0].data

    namespace["meddle"] = meddle
    touch = session.get("meddle")
    model = GPT(seed=0, n_embd=4, n_head=1, vocab_size=3, block_size=2)
    before = model.state_dict["wpe"][1][0].data
    assert touch(model, "leaf") == before and model.state_dict["wpe"][0][0].data == 4.0
    value, sent = _sent(session, lambda: touch(model, "leaf"))
    assert '"S":' in sent[0]
    assert touch(model, "row") == 3.0 and model.state_dict["wpe"][1][0].data == 3.0
    value, sent = _sent(session, lambda: touch(model, "cache"))
    assert '"O":' in sent[0]  # the row the kernel replaced: the model went whole again
    assert model._weight_numbers is None
    with model._applying_fixed_weights():
        out = model.head([Value(0.0), Value(1.0), Value(0.0), Value(0.0)])
    assert all(abs(v.data) < 10 for v in out)  # computed from the grader's own weights
