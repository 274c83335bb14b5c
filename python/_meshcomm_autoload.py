"""Makes the torch.distributed backend "meshcomm" available to every torch
program of the environment meshcomm's wheel is installed in, with no
``import meshcomm`` in the script::

    import torch.distributed as dist
    dist.init_process_group("meshcomm")

The wheel names :func:`register` in the entry-point group "torch.backends".
torch 2.5 and later load that group from inside ``import torch``
(``_import_device_backends`` in torch/__init__.py, which runs after
torch.distributed is imported), unless TORCH_DEVICE_BACKEND_AUTOLOAD=0.

Every torch program pays for this hook, so it does only what cannot wait:
it names the backend (with a creator that imports meshcomm.torch when the
first group is made) and fills in the variables torch's env:// reads under
mpirun, mpiexec, srun and meshrun (see meshcomm/torch/launch_env.py), which
must be set before init_process_group reads them. It imports neither the
meshcomm package nor its extension. A failure here must not break
``import torch``: it becomes a warning, and ``import meshcomm.torch`` still
works (and says what is wrong).
"""

import importlib.util
import os

__all__ = ["register"]

_BACKEND = "meshcomm"


def register():
    """The "torch.backends" entry point: registers the backend lazily."""
    try:
        import torch.distributed as dist  # torch has imported it already

        if not dist.is_available():
            return
        _export_launcher_env()
        if _BACKEND.upper() not in dist.Backend._plugins:
            dist.Backend.register_backend(_BACKEND, _create, extended_api=True, devices=["cpu"])
    except Exception as err:  # noqa: BLE001 - torch turns any error into a failed import
        import warnings

        warnings.warn(f"meshcomm: could not register the torch.distributed backend "
                      f"\"{_BACKEND}\" when torch started ({type(err).__name__}: {err}); "
                      f"`import meshcomm.torch` registers it and reports the cause.",
                      RuntimeWarning, stacklevel=2)


def _create(options, backend_options=None):
    """torch calls this for each new group of the backend: the first call
    imports meshcomm.torch (its own registration then finds this one and
    keeps it) and hands the group to it."""
    from meshcomm.torch import process_group

    return process_group.create(options, backend_options)


def _export_launcher_env():
    """Runs meshcomm/torch/launch_env.py's export_launcher_env, loading that
    one standard-library file rather than the package."""
    package = importlib.util.find_spec("meshcomm")  # locates without importing
    if package is None or not package.submodule_search_locations:
        return
    for folder in package.submodule_search_locations:
        path = os.path.join(folder, "torch", "launch_env.py")
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("_meshcomm_launch_env", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            module.export_launcher_env()
            return
