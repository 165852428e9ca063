"""Real engines behind a process boundary, one registry entry each (registry.py: vLLM, SGLang,
llama.cpp, and TensorRT-LLM for its knobs alone): their servers (launched here or reached by URL)
beside the reference loop, the one reader of their logs and of their `/metrics` pages, and their
speculation conventions (knobs.py: synthetic acceptance from a profile, chain flags). The kit never imports an engine; it talks over
HTTP. Figures of these results are in `eagle_nb.views.engine_figures`.

    parse_log(text) -> ParsedLog(df, summary)      parse_metrics(text) / scrape(url) -> Counters
    observe(log=, url=, tau=) -> Observation       compare(...) -> Comparison (.to_json(), .table(), .verdict)

Names resolve lazily (as the package façade's do), so that reading the registry starts fast.
"""
from importlib import import_module

_EXPORTS = {
    "Comparison": "comparison", "compare": "comparison", "metrics_from_counters": "comparison",
    "reference_run": "comparison", "side_by_side": "comparison",
    "Counters": "metrics", "parse_metrics": "metrics", "scrape": "metrics",
    "ParsedLog": "logs", "parse_log": "logs", "Observation": "observation", "observe": "observation",
    "Endpoint": "endpoint", "EngineError": "server", "engine_python": "server", "stop_all": "server",
    "VllmServer": "vllm", "serve": "vllm", "engine_unavailable_reason": "vllm",
    "LlamaServer": "llama_cpp", "llama_server_binary": "llama_cpp",
    "llama_unavailable_reason": "llama_cpp", "infer_sglang_formula": "sglang",
    "write_broken_drafter": "broken", "ENGINES": "registry", "target_agreement": "target_only",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(import_module(f"eagle_nb.engines.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'eagle_nb.engines' has no attribute {name!r}")
