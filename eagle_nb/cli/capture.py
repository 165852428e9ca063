"""`eagle-nb capture`: the target's hidden states at the layer ids EAGLE-3 would capture, as a table
or JSON (ids, shapes, dtypes, mean norms, the fused width). Parses flags, calls
`model.capture`, prints."""
from __future__ import annotations

import json

from eagle_nb.cli import options


def add_parser(sub):
    p = options.command(
        sub, "capture", help="capture target hidden states at layer ids",
        description="capture the target's hidden states at layer ids (what EAGLE-3 would capture)",
        examples="""\
            eagle-nb capture --prompt "def f(x):" --layers eagle3 --json
            eagle-nb capture --prompt "x" --layers 1,3,4 --convention sglang-config""")
    options.target(p)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--chat", help="one user turn, sent through the target's chat template")
    g.add_argument("--prompt", help="one raw prompt text")
    options.layers(p)
    options.device(p)
    options.json_output(p)
    return p


def run(a) -> int:
    import torch

    from eagle_nb.model.capture import capture, norm_profile
    from eagle_nb.model.decoder import num_decoder_layers
    from eagle_nb.model.limits import as_input_ids, encode, fit_prompt
    from eagle_nb.model.targets import load_target
    prompt = options.prompt_list(a)[0]
    model, tok = load_target(a.target, device=a.device)
    L = num_decoder_layers(model, a.layers_path)
    ids = options.layer_ids(a.layers, a.convention, L)
    x = as_input_ids(encode(tok, prompt, "--chat" if a.chat is not None else "--prompt"))
    x = fit_prompt(x, model, 0, 0, where="--prompt").to(next(model.parameters()).device)
    with torch.no_grad(), capture(model, ids, layers_path=a.layers_path) as states:
        model(input_ids=x)
    fused = states.fused()
    out = {"num_layers": L, "hidden_size": int(states[ids[0]].shape[-1]), "layer_ids": states.layer_ids,
           "convention_input": a.convention, "layers_path": states.layers_path,
           "states": [{"layer_id": k, "name": states.key(k), "shape": list(states[k].shape),
                       "dtype": str(states[k].dtype).replace("torch.", ""), "mean_norm": mean}
                      for k, mean, _ in norm_profile(states)],
           "fused_shape": list(fused.shape)}
    if a.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"{L} decoder layers at {states.layers_path}; captured HF ids {states.layer_ids}")
        print(states.table().to_string(index=False))
    return 0
