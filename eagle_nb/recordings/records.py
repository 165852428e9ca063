"""One recorded prompt (`Record`: prompt + greedy continuation + aux states) and the error every
recording reader raises. The data type shared by recording.py (the kit's format) and
foreign_features.py (other trainers' files).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


class RecordingError(ValueError):
    """A recording cannot be read or does not fit what was asked; the message names file and key."""


@dataclass
class Record:
    name: str
    input_ids: torch.Tensor          # (T,) int64: prompt then continuation
    prompt_len: int
    aux: torch.Tensor                # (n_fed, n_aux*H): aux states of positions 0..n_fed-1
    final: torch.Tensor | None = None  # (n_fed, H) post-norm final state, when recorded

    @property
    def continuation(self) -> list[int]:
        return self.input_ids[self.prompt_len:].tolist()
