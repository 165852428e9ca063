"""The fault names: one constant per entry of the fault registry (`experiment/faults.py` keys its
entries by these), the only place a fault's name is written as a string.

They live here, below `checkpoints/`, because modules that may not import the registry name faults
too: the GGUF writer plants them and its checks name them (checkpoints/gguf_write.py,
checkpoints/gguf.py), the checkpoint validator's d2t finding has the fault's name as its code
(checkpoints/validate.py), `SpecConfig` holds ablations by name (config.py). Every other fact
about a fault is its registry entry's. The registry refuses to build when a name here has no
entry, and `tests/test_layout.py` refuses a fault name written as a string anywhere else in the
package. Knows names only.
"""
from __future__ import annotations

# switches, in the registry's application order
LAYERS0_KEYS_DROPPED = "layers0-keys-dropped"
EMBED_RANDOM = "embed-random"
EMBED_TARGET_FORCED = "embed-target-forced"
LM_HEAD_MISSING = "lm-head-missing"
NORM_BEFORE_FC_DROPPED = "norm-before-fc-dropped"
NORM_BEFORE_FC_FORCED = "norm-before-fc-forced"
NORM_OUTPUT_DROPPED = "norm-output-dropped"
NORM_OUTPUT_FORCED = "norm-output-forced"
NORM_BEFORE_RESIDUAL_FORCED = "norm-before-residual-forced"
OUTPUT_NORM_RESIDUAL = "output-norm-residual"
ROPE_THETA_WRONG = "rope-theta-wrong"
FP16_FC_OVERFLOW = "fp16-fc-overflow"
D2T_ABSOLUTE = "d2t-absolute"
D2T_IDENTITY = "d2t-identity"
D2T_SIDE_FILE = "d2t-side-file"
WRAPPER_CAPTURE = "wrapper-capture"
FC_BYPASS = "fc-bypass"
LAYER_IDS_PLUS_1 = "layer-ids+1"
LAYER_IDS_MINUS_1 = "layer-ids-1"
LAYER_IDS_HEURISTIC = "layer-ids-heuristic"
# crash-only
FC_WIDTH_MISMATCH = "fc-width-mismatch"
NO_EAGLE3_INTERFACE = "no-eagle3-interface"
NO_CAPTURE_HOOKS = "no-capture-hooks"
DRAFT_NUM_LAYERS = "draft-num-layers"
DRAFT_VOCAB_SHORT = "draft-vocab-short"
# static-only
VOCAB_MISMATCH = "vocab-mismatch"
ARCHITECTURE_NAME = "architecture-name"
# serving-only
EMBED_NOT_SHARED = "embed-not-shared"

NAMES: tuple[str, ...] = tuple(v for k, v in dict(globals()).items()     # every constant above,
                               if k.isupper() and isinstance(v, str))      # in order
