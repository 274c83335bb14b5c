"""GroupOptions: extra settings for new_group.

MindSpore's options configure HCCL (``hccl_config`` with
``hccl_buffer_size`` or ``hccl_comm``). None of them has a meaning for
meshcomm's CPU transports: they are accepted, so code written for Ascend
runs unchanged, and ignored with a warning when set.
"""

import warnings

__all__ = ["GroupOptions"]


class GroupOptions:
    """Additional configuration of a group created by ``new_group``.

    Attributes:
        hccl_config (dict): HCCL settings (``"hccl_buffer_size"``,
            ``"hccl_comm"``); ignored by meshcomm, with a warning.

    Example:
        >>> options = meshcomm.GroupOptions()
        >>> options.hccl_config = {"hccl_buffer_size": 400}
        >>> group = meshcomm.new_group([0, 1], pg_options=options)  # warns
    """

    def __init__(self, hccl_config=None):
        self.hccl_config = {} if hccl_config is None else hccl_config

    def __repr__(self):
        return f"GroupOptions(hccl_config={self.hccl_config!r})"

    def _warn_ignored(self, stacklevel):
        config = self.hccl_config
        if not isinstance(config, dict):
            raise TypeError("GroupOptions.hccl_config must be a dict, got "
                            f"{type(config).__name__}")
        if config:
            warnings.warn(f"GroupOptions: {sorted(config)} have no meaning for meshcomm's CPU "
                          "transports and are ignored", UserWarning, stacklevel=stacklevel + 1)
