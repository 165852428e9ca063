"""What llama.cpp expects in a GGUF EAGLE-3 drafter and its target: key names, tensor names, the
layer-id and d2t conventions. Facts read in the llama.cpp vendored by `llama-cpp-python==0.3.36`
(`vendor/llama.cpp`, ggml 0.25.3):

- `src/models/eagle3.cpp` (`llama_model_eagle3::load_arch_hparams/_tensors`): architecture
  `eagle3`; `eagle3.target_layers` (exactly 3 ints, required), `eagle3.target_hidden_size`,
  optional `eagle3.norm_before_residual` / `eagle3.norm_before_fc`; tensors `fc.weight`
  {3*Ht, H}, `blk.0.attn_norm` (input_layernorm), `blk.0.attn_norm_2` (hidden_norm),
  `blk.0.attn_q/k/v` with 2*H inputs, `blk.0.attn_output`, `blk.0.ffn_norm/gate/up/down`,
  `output_norm`, optional `output` (else the target's lm_head), optional `token_embd` (else the
  target's), optional `d2t` (I64, one entry per draft id), `enc.output_norm` when norm_before_fc.
- d2t holds ABSOLUTE target ids: the draft logits are scattered with `ggml_set_rows(..., d2t)`
  into a full-vocabulary row filled with -inf. `conversion/llama.py` (`prepare_tensors`) writes
  `d2t + arange` from a checkpoint's offsets and refuses ids out of range or repeated.
- Layer ids are HF `hidden_states` indices: `common/speculative.cpp` (draft-eagle3) turns on
  `llama_set_embeddings_layer_inp(ctx_tgt, id)`, and `src/models/llama.cpp` records
  `t_layer_inp[il] = inpL`, the input of decoder layer il (= HF hidden_states[il]); id == n_layer
  reads the target's nextn embeddings (none for a Llama target). `conversion/llama.py` copies the
  checkpoint's `eagle_aux_hidden_state_layer_ids` as written, else [2, L//2, L-3].
- q/k weights are stored permuted (llama.cpp's NORM rope on consecutive pairs vs HF rotate-half):
  `LlamaModel.permute` in `conversion/llama.py`; eagle3 uses LLAMA_ROPE_TYPE_NORM
  (`src/llama-model.cpp`, `llama_model_rope_type`).
- The draft must share the target's vocabulary (`common/speculative.cpp`,
  `common_speculative_are_compatible`: vocab type, add_bos/eos and their ids, token texts).
Knows names and conventions; reads and writes nothing.
"""
from __future__ import annotations

import numpy as np

LLAMA_CPP_SOURCE = "llama-cpp-python==0.3.36 (vendor/llama.cpp)"
DRAFT_ARCH = "eagle3"
TARGET_ARCH = "llama"
KEY_LAYERS = "eagle3.target_layers"
KEY_TARGET_HIDDEN = "eagle3.target_hidden_size"
KEY_NORM_BEFORE_RESIDUAL = "eagle3.norm_before_residual"
KEY_NORM_BEFORE_FC = "eagle3.norm_before_fc"
LAYER_ID_CONVENTION = ("HF hidden_states ids: id k reads the input of target layer k "
                       "(llama.cpp common/speculative.cpp + src/models/llama.cpp t_layer_inp)")

# the kit's drafter names (checkpoints/detect.py) -> llama.cpp tensor names
TOP = {"fc.weight": "fc.weight", "norm.weight": "output_norm.weight",
       "lm_head.weight": "output.weight", "embed_tokens.weight": "token_embd.weight",
       "input_norm.weight": "enc.output_norm.weight"}
LAYER = {"input_layernorm": "attn_norm", "hidden_norm": "attn_norm_2",
         "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
         "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
         "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
# required in an eagle3 GGUF (src/models/eagle3.cpp creates them without TENSOR_NOT_REQUIRED)
REQUIRED_DRAFT = ("fc.weight", "output_norm.weight", "blk.0.attn_norm.weight",
                  "blk.0.attn_norm_2.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight",
                  "blk.0.attn_v.weight", "blk.0.attn_output.weight", "blk.0.ffn_norm.weight",
                  "blk.0.ffn_gate.weight", "blk.0.ffn_up.weight", "blk.0.ffn_down.weight")


def layer_tensor_name(rest: str, block: int) -> str:
    """`self_attn.q_proj.weight` in block 3 -> `blk.3.attn_q.weight`; KeyError when unknown."""
    base, _, suffix = rest.rpartition(".")
    return f"blk.{block}.{LAYER[base]}.{suffix}"


def permute_qk(w: np.ndarray, n_head: int, n_head_kv: int | None = None) -> np.ndarray:
    """HF rotate-half q/k rows -> llama.cpp's interleaved pairs (convert_hf_to_gguf's
    LlamaModel.permute); `n_head_kv` for k."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def d2t_absolute(offsets: np.ndarray) -> np.ndarray:
    """Checkpoint offsets (target id = i + d2t[i]) -> llama.cpp's absolute target ids."""
    off = np.asarray(offsets, dtype=np.int64).reshape(-1)
    return off + np.arange(off.size, dtype=np.int64)
