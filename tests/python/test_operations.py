"""The operation table (``_meshcomm.OPERATIONS``, from the C++ table in
src/collectives/operations.h) against the Python API: every native
operation is a public function of the same name, bound on ProcessGroup
under that name, and taking the arguments its flags say; every public
communication function is a native operation or composed of them.
"""

import inspect

import meshcomm
from meshcomm import _meshcomm
from meshcomm.inplace import COMM_FUNCS

OPERATIONS = _meshcomm.OPERATIONS
# Communication functions written in Python on top of the native operations.
COMPOSED = {"isend", "irecv", "all_to_all_v_c", "all_gather_object", "broadcast_object_list",
            "gather_object", "scatter_object_list"}
COMM_MODULES = {"meshcomm.collectives", "meshcomm.gather_scatter", "meshcomm.alltoall",
                "meshcomm.p2p", "meshcomm.objects"}


def test_every_operation_is_a_public_function():
    assert OPERATIONS, "the table is empty"
    for name in OPERATIONS:
        assert name in meshcomm.__all__, name
        assert inspect.isfunction(getattr(meshcomm, name)), name


def test_every_public_communication_function_is_an_operation_or_composed():
    public = {name for name in meshcomm.__all__
              if inspect.isfunction(getattr(meshcomm, name))
              and getattr(meshcomm, name).__module__ in COMM_MODULES}
    assert public == set(OPERATIONS) | COMPOSED


def test_every_operation_is_bound_under_its_name():
    for name in OPERATIONS:
        assert callable(getattr(_meshcomm.ProcessGroup, name, None)), name


def test_in_place_mode_covers_every_communication_function():
    assert set(COMM_FUNCS) == set(OPERATIONS) | COMPOSED
    assert len(COMM_FUNCS) == len(set(COMM_FUNCS))


def test_flags_match_the_python_signatures():
    for name, info in OPERATIONS.items():
        params = inspect.signature(getattr(meshcomm, name)).parameters
        assert ("op" in params) == info["reduces"], name
        assert info["root"] in (None, "src", "dst"), name
        if info["root"] is not None:
            assert info["root"] in params, name
        assert any(p.endswith("split_sizes") for p in params) == info["split_sizes"], name
        assert ("tag" in params) == info["tagged"], name


def test_families_are_the_wire_values():
    # The family values travel in every message: they never change.
    families = {name: info["family"] for name, info in OPERATIONS.items()}
    assert families["all_reduce"] == 1
    assert families["broadcast"] == 2
    assert families["reduce"] == 3
    assert families["all_gather_into_tensor_uneven"] == families["all_gather"] == 4
    assert families["reduce_scatter_tensor"] == 5
    assert families["gather_into_tensor"] == 6
    assert families["scatter_tensor"] == 7
    assert families["all_to_all_single"] == 8
    assert families["barrier"] == 9
    assert families["send"] == families["recv"] == families["batch_isend_irecv"] == 10
