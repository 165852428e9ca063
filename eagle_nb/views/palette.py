"""The kit's one palette: healthy in one colour, each fault in the colour at its position in the
fault registry (`experiment.faults.REGISTRY`), so a fault keeps its colour in every figure and a
new fault gets one without an edit here. Labels that are not one registry name (combinations such
as 'a + b') get a stable colour from their text. Published reference curves are grey (plots.py).
Knows colours only.
"""
from __future__ import annotations

import zlib

from eagle_nb.experiment import faults as F

HEALTHY_COLOR = "#1565c0"
# Indexed by registry position (wrapping past the end). The panel's faults (positions 0, 12, 15-18
# of today's registry) keep the colours the figures have always used.
PALETTE = ("#8d6e63", "#ad1457", "#6d4c41", "#f9a825", "#283593", "#558b2f", "#00838f", "#4e342e",
           "#d81b60", "#5e35b1", "#9e9d24", "#bf360c", "#8e24aa", "#4527a0", "#ff7043", "#ef6c00",
           "#c62828", "#2e7d32", "#00897b", "#6a1b9a", "#827717", "#0097a7", "#7cb342", "#e64a19",
           "#3949ab", "#a1887f", "#f06292", "#004d40")


def fault_color(name: str) -> str:
    """The colour of 'healthy', of a registry fault (by its position), or of any other label."""
    if name == F.HEALTHY:
        return HEALTHY_COLOR
    i = F.ORDER.get(name)
    return PALETTE[(zlib.crc32(name.encode()) if i is None else i) % len(PALETTE)]
