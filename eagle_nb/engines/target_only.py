"""The target alone, in the kit and in llama.cpp: greedy tokens for the same token-id prompts from
the kit's target and from llama-server started with no draft model, on a target file of its own
(the Q4_1 GGUF the shipped target was dequantized from runs llama.cpp's Q4_1 kernels; the kit runs
the dequantized weights in float32). Where the two disagree, the engine's target numerics changed
the tokens before any drafter is involved: speculation on that engine can agree with the kit only
as far as its target does. Knows the pair's tokenizer and the llama.cpp entry; no acceptance.
"""
from __future__ import annotations

from eagle_nb.engines.agreement import agreement


def kit_target_greedy(pair, prompts, max_new_tokens: int, *, decode: bool = False,
                      depth: int = 4) -> list[list[int]]:
    """The kit target's greedy tokens per prompt, stopping at EOS. By default the healthy greedy
    reference run's output (cached by the pair; greedy speculation is lossless, so these are the
    target's greedy tokens: `Pair.run(check_reference=True)` checks it token for token);
    `decode=True` decodes target-only, one token per forward (`loop.chain.greedy_reference`, about
    100x slower on a 2-core CPU). The tokens do not depend on `depth`: pass the depth already run,
    so that the pair's cache answers."""
    if not decode:
        from eagle_nb.engines.comparison import reference_run
        return reference_run(pair, prompts, depth=depth, max_new_tokens=max_new_tokens, temperature=0.0,
                             seed=0)[1]
    from eagle_nb.loop.chain import greedy_reference
    return [greedy_reference(pair.target, pair.encode(p), max_new_tokens, eos_token_id=pair.eos_token_id)[0]
            for p in prompts]


def llama_target_greedy(target, ids, max_new_tokens: int, *, threads: int | None = None,
                        startup_timeout: float = 300.0) -> list[list[int]]:
    """llama-server's greedy tokens for token-id prompts `ids`, on `target` (a GGUF file, or an HF
    directory written as a float32 GGUF) with no draft model."""
    from eagle_nb.engines.llama_cpp import LlamaServer, run_complete
    with LlamaServer(target, None, threads=threads, startup_timeout=startup_timeout) as server:
        return run_complete(server.url, ids, max_new_tokens, 0.0, None)[0]


def target_agreement(pair, prompts, max_new_tokens: int = 64, target=None, *, decode: bool = False,
                     depth: int = 4, **kw) -> dict:
    """Token agreement (`agreement.agreement`) of llama.cpp's target-only greedy tokens on `target`
    (default: the pair's own target, as a float32 GGUF) against the kit's target greedy tokens
    (`kit_target_greedy`), with both token lists ("kit", "engine") and the file llama.cpp ran."""
    from eagle_nb.engines.llama_cpp import llama_unavailable_reason
    target = target or pair.target_path
    reason = llama_unavailable_reason()
    if reason:
        return {"available": False, "prompts": len(prompts), "reason": reason, "engine_target": str(target)}
    kit = kit_target_greedy(pair, prompts, max_new_tokens, decode=decode, depth=depth)
    ids = [pair.encode(p)[0].tolist() for p in prompts]
    eng = llama_target_greedy(target, ids, max_new_tokens, **kw)
    return {**agreement(kit, eng), "engine_target": str(target), "kit": kit, "engine": eng}
