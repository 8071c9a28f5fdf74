"""One CPU process group for ``deepspeed.initialize`` in an oracle test module (``dist`` fixtures import this)."""

from __future__ import annotations

import contextlib
import importlib
import os
import socket
from collections.abc import Iterator
from unittest import mock


@contextlib.contextmanager
def cpu_process_group() -> Iterator[None]:
    """A one-rank gloo world on a free loopback port, torn down afterwards (DeepSpeed's cached groups too, and
    ``torch.nn.functional.linear``, which a ZeRO-3 ``deepspeed.initialize`` replaces with its own wrapper for the
    rest of the process: a later test measuring what autograd saves would see the wrapper's tensors)."""
    import torch
    import torch.nn.functional as F

    linear = F.linear

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}
    comm_torch = importlib.import_module("deepspeed.comm.torch")
    forget_groups()  # groups another test module's process group left in deepspeed.utils.groups
    with mock.patch.dict(os.environ, env), mock.patch.object(comm_torch, "build_shm_op", lambda: None):
        yield
        import deepspeed.comm.comm as ds_comm_state

        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
        ds_comm_state.cdb = None
        forget_groups()
        F.linear = linear


def forget_groups() -> None:
    """deepspeed.utils.groups caches the process groups it made (its module-level `_..._GROUP` names); once a
    test module destroys its process group they are stale, and the next deepspeed.initialize would use them."""
    from deepspeed.utils import groups

    for name, value in list(vars(groups).items()):
        if name.startswith("_") and name.endswith(("_GROUP", "_GROUP_RANKS")):
            if isinstance(value, dict):
                value.clear()
            else:
                setattr(groups, name, None)
