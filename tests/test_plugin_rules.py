"""The rule table: ordered rules per tile op, priorities, dict-style replacement, and the hooks
that fill it (pure Python: no TVM)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecore.plugin import hookimpl, register_plugin, unregister_plugin
from tilecore.plugin.registry import get_registry
from tilecore.plugin.rules import LoweringRule, RuleTable, collect_lowering_tables


def named(name):
    def rule(lowering, stmt):
        return NotImplemented

    rule.__name__ = name
    return rule


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["Gemm", "Copy", "Reduce"]), st.integers(-2, 2)), max_size=12))
def test_rules_are_tried_by_priority_then_in_the_order_added(entries):
    table = RuleTable()
    for i, (op, prio) in enumerate(entries):
        table.add(op, named(f"r{i}"), priority=prio)
    for op in {op for op, _ in entries}:
        mine = [(-prio, i) for i, (o, prio) in enumerate(entries) if o == op]
        assert table.describe()[op] == [f"r{i}" for _, i in sorted(mine)]
        assert [r.__name__ for r in table[op]] == table.describe()[op]


def test_assignment_replaces_an_ops_rules_and_get_gives_the_first():
    table = RuleTable()
    table.add("Gemm", named("vendor_a"))
    table.add("Gemm", named("vendor_b"))
    assert table.get("Gemm").__name__ == "vendor_a" and "Gemm" in table and "Copy" not in table
    table["Gemm"] = named("mine")
    assert table.describe() == {"Gemm": ["mine"]}
    table.remove("Gemm", "mine")
    assert "Gemm" not in table and table.get("Gemm") is None
    with pytest.raises(KeyError, match="no lowering rule 'mine'"):
        table.remove("Gemm", "mine")


def test_a_rule_must_be_callable_and_rule_objects_are_named_by_their_name():
    table = RuleTable()
    with pytest.raises(TypeError, match="must be callable"):
        table.add("Gemm", "not a rule")

    class Wgmma(LoweringRule):
        name = "wgmma"

    rule = Wgmma()
    table.add("Gemm", rule)
    table.add("Fill", rule)
    assert table.describe() == {"Gemm": ["wgmma"], "Fill": ["wgmma"]}
    assert table.all_rules() == [rule]  # planned once although registered for two ops
    assert rule(None, None) is NotImplemented and rule.accumulator_layout(None, 4, False, None, None) is None


def test_hooks_of_every_plugin_fill_the_tables_for_their_backend_only():
    class Vendor:
        @hookimpl
        def tilecore_lowering_rules(self, backend, rules):
            if backend.name == "reference":
                rules.add("Gemm", named("vendor_gemm"))

        @hookimpl
        def tilecore_intrinsics(self, backend, table):
            if backend.name == "reference":
                table.setdefault(("tanh", "float32"), "vendor_tanh")

    class ThirdParty:
        @hookimpl
        def tilecore_lowering_rules(self, backend, rules):
            if backend.name == "reference":
                rules.add("Gemm", named("override"), priority=5)

        @hookimpl
        def tilecore_intrinsics(self, backend, table):
            if backend.name == "reference":
                table[("tanh", "float32")] = "third_party_tanh"

    names = [register_plugin(Vendor(), name="test-vendor"), register_plugin(ThirdParty(), name="test-third")]
    try:
        backend, _ = get_registry().resolve("reference")
        rules, table = collect_lowering_tables(backend)
    finally:
        for n in names:
            unregister_plugin(n)
    assert rules.describe()["Gemm"][:2] == ["override", "vendor_gemm"]
    assert table[("tanh", "float32")] == "third_party_tanh"


def test_a_failing_rule_hook_is_an_error_not_a_silently_smaller_table():
    class Broken:
        @hookimpl
        def tilecore_lowering_rules(self, backend, rules):
            raise RuntimeError("broken rule set")

    name = register_plugin(Broken(), name="test-broken")
    try:
        backend, _ = get_registry().resolve("reference")
        with pytest.raises(RuntimeError, match="broken rule set"):
            collect_lowering_tables(backend)
    finally:
        unregister_plugin(name)
