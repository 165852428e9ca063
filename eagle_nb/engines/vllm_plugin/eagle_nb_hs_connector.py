"""vLLM KV connector for `eagle-nb record --engine vllm`: vLLM's ExampleHiddenStatesConnector with a
synchronous write where the KV cache is not on a CUDA device (the vLLM CPU build).

Runs INSIDE the engine's process and environment (handed over by
`--kv-transfer-config '{"kv_connector": "EagleNbHiddenStatesConnector",
"kv_connector_module_path": "eagle_nb_hs_connector", ...}'` with this file's folder on PYTHONPATH):
it imports vLLM, torch and safetensors only, never eagle_nb. On CUDA the stock asynchronous path
runs unchanged. The stock one (vLLM 0.32, example_hidden_states_connector.py:253-257, 383-409) calls
torch.cuda.Stream(), torch.cuda.Event() and pin_memory, which fail on a CPU-only build.
"""
import os

import torch
from safetensors.torch import save_file
from vllm.distributed.kv_transfer.kv_connector.v1.example_hidden_states_connector import (
    ExampleHiddenStatesConnector, extract_from_kv_cache)
from vllm.logger import init_logger

logger = init_logger(__name__)


class _Written:
    """Stands in for the stock connector's CUDA event: the write has already happened."""

    def query(self) -> bool:
        return True


class EagleNbHiddenStatesConnector(ExampleHiddenStatesConnector):
    """Same files, same `kv_transfer_params["hidden_states_path"]`, same lock protocol."""

    def _submit_async_write(self, pending) -> None:
        if self._kv_cache is not None and self._kv_cache.is_cuda:
            return super()._submit_async_write(pending)
        if not self._is_tp_rank_zero:
            return
        bs = self._block_size
        blocks = torch.tensor(pending.block_ids, dtype=torch.long)
        slots = (torch.arange(bs, dtype=torch.long).view(1, bs) + blocks.view(-1, 1) * bs).flatten()
        states = extract_from_kv_cache(self._kv_cache, slots, pending.token_ids.shape[0]).clone()
        os.makedirs(os.path.dirname(pending.filename) or ".", exist_ok=True)
        lock_fd = self._lock_fds.pop(pending.req_id, None)
        try:
            save_file({"hidden_states": states.contiguous(), "token_ids": pending.token_ids.clone()},
                      pending.filename)
        except Exception as e:  # noqa: BLE001 - the engine must keep serving; the client reports it
            logger.error("eagle_nb: hidden-states write failed for %s (%s): %r", pending.req_id,
                         pending.filename, e)
        finally:
            if lock_fd is not None:
                os.close(lock_fd)                          # releases LOCK_EX: readers may go on
        self._req_copy_events[pending.req_id] = _Written()
