"""Which parts of an IR can produce a string: the Python answers (`TreeLiveness`) and the
flat IR's (`FlatLiveness`) agree, rules decided over several rounds included."""

from structgen.automata.flat import FlatIR
from structgen.automata.liveness import TreeLiveness
from structgen.grammar import ir


def rule_chain(length: int) -> tuple[ir.Node, list[ir.Ref]]:
    """Rules r0 .. r{n-1}, each a one-edge Graph reading the next rule, the last reading
    "x"; the root lists the first rule first, so a fixpoint round decides it before the
    rule its Graph reads."""
    rules = [ir.Ref(f"r{i}") for i in range(length)]
    for rule, following in zip(rules, rules[1:]):
        rule.target = ir.Graph(2, 0, (1,), ((0, 1, following),))
    rules[-1].target = ir.Bytes(b"x")
    return ir.Alt(tuple(rules)), rules


def test_a_rule_read_through_a_graph_is_live_whatever_round_decides_it():
    for length in (2, 3, 5):
        root, rules = rule_chain(length)
        tree, flat = TreeLiveness(root), FlatIR(root).liveness()
        assert [tree.nonempty(rule) for rule in rules] == [True] * length
        assert [flat.nonempty(rule) for rule in rules] == [True] * length
        assert all(0 in tree.graph_live(rule.target)[0] for rule in rules[:-1])


def test_a_rule_with_no_way_out_stays_empty():
    loop = ir.Ref("loop")
    loop.target = ir.Graph(2, 0, (1,), ((0, 1, loop),))  # reads itself before anything
    root = ir.Alt((loop, ir.Bytes(b"y")))
    assert not TreeLiveness(root).nonempty(loop)
    assert not FlatIR(root).liveness().nonempty(loop)
