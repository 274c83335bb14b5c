"""latency_breakdown.py's reading of callgrind's call tree and its split
of one call among the parts, on a made-up tree (no valgrind needed)."""

import importlib.util
import os

import pytest

_spec = importlib.util.spec_from_file_location(
    "latency_breakdown", os.path.join(os.path.dirname(__file__), "latency_breakdown.py"))
lb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lb)

# callgrind_annotate --tree=both --inclusive=yes, trimmed: 10 calls of
# allReduce; collectives::allReduce calls a helper that waits and reduces;
# dtypeSize is called from two places (its cost splits by caller).
ANNOTATED = """
 1,000 (50.0%)  < ???:bench::issue(int) (10x) [/bin/meshcomm-bench]
 1,000 (50.0%)  *  ???:meshcomm::ProcessGroup::allReduce(meshcomm::TensorRef, meshcomm::OpOptions const&) [/bin/meshcomm-bench]
   600 (30.0%)  >   ???:meshcomm::collectives::allReduce(meshcomm::Comm&) (10x) [/bin/meshcomm-bench]
   100 (5.0%)  >   ???:meshcomm::OpTrace::collective(int) (10x) [/bin/meshcomm-bench]
    50 (2.5%)  >   ???:meshcomm::dtypeSize(meshcomm::DType) (10x) [/bin/meshcomm-bench]

   600 (30.0%)  < ???:meshcomm::ProcessGroup::allReduce(meshcomm::TensorRef, meshcomm::OpOptions const&) (10x) [/bin/meshcomm-bench]
   600 (30.0%)  *  ???:meshcomm::collectives::allReduce(meshcomm::Comm&) [/bin/meshcomm-bench]
   300 (15.0%)  >   ???:meshcomm::ShmDomain::waitFor(int) (10x) [/bin/meshcomm-bench]
   150 (7.5%)  >   ???:meshcomm::reduce::reduceInto(int) (10x) [/bin/meshcomm-bench]
    50 (2.5%)  >   ???:meshcomm::dtypeSize(meshcomm::DType) (10x) [/bin/meshcomm-bench]

   100 (5.0%)  < ???:meshcomm::ProcessGroup::allReduce(meshcomm::TensorRef, meshcomm::OpOptions const&) (10x) [/bin/meshcomm-bench]
   100 (5.0%)  *  ???:meshcomm::dtypeSize(meshcomm::DType) [/bin/meshcomm-bench]
"""


@pytest.fixture
def graph(tmp_path, monkeypatch):
    class Done:
        stdout = ANNOTATED

    monkeypatch.setattr(lb.subprocess, "run", lambda *a, **k: Done())
    return lb.Graph(str(tmp_path / "callgrind.1"))


def test_reads_costs_calls_and_callees(graph):
    entry = graph.find(r"^meshcomm::ProcessGroup::allReduce\(")
    assert graph.incl[entry] == 1000
    assert graph.calls[entry] == 10
    assert [c[0].split("(")[0] for c in graph.callees[entry]] == [
        "meshcomm::collectives::allReduce", "meshcomm::OpTrace::collective", "meshcomm::dtypeSize"]


def test_splits_one_call_among_the_parts(graph):
    parts, calls = lb.breakdown(graph, graph.find(r"^meshcomm::ProcessGroup::allReduce\("))
    assert calls == 10
    # per call: 1000 / 10 in all, every instruction in exactly one part
    assert sum(parts.values()) == pytest.approx(100)
    assert parts["wait for the peers"] == pytest.approx(30)
    assert parts["reduction kernel"] == pytest.approx(15)
    assert parts["flight recorder"] == pytest.approx(10)
    # the collective's own instructions and its dtypeSize call
    assert parts[lb.BODY] == pytest.approx(10 + 5)
    # the entry's own instructions and its dtypeSize call
    assert parts[lb.SETUP] == pytest.approx(25 + 5)
