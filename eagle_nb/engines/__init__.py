"""The engine in the loop: a real vLLM or llama.cpp (launched here or reached by URL) beside the
reference loop, and vLLM / SGLang / llama.cpp log and metrics readers. The kit never imports an engine; it talks over HTTP.
Figures of these results are in `eagle_nb.views.engine_figures`.

    parse_log(text) -> ParsedLog(df, summary)      scrape(url) -> Counters
    compare(...) -> Comparison (.to_json(), .table(), .verdict)
"""
from eagle_nb.engines.broken import write_broken_drafter
from eagle_nb.engines.compare import (
           Comparison,
           compare,
           metrics_from_counters,
           reference_run,
           side_by_side,
)
from eagle_nb.engines.endpoint import Counters, Endpoint, parse_metrics, scrape
from eagle_nb.engines.llama_cpp import (
           LlamaServer,
           llama_server_binary,
           llama_unavailable_reason,
)
from eagle_nb.engines.logs import ParsedLog, infer_sglang_formula, parse_log
from eagle_nb.engines.server import (
           EngineError,
           VllmServer,
           engine_python,
           engine_unavailable_reason,
           serve,
           stop_all,
)

__all__ = ["Comparison", "Counters", "Endpoint", "EngineError", "LlamaServer", "ParsedLog", "VllmServer",
           "compare", "engine_python", "engine_unavailable_reason", "infer_sglang_formula",
           "llama_server_binary", "llama_unavailable_reason", "metrics_from_counters",
           "parse_log", "parse_metrics", "reference_run", "scrape", "serve", "side_by_side",
           "stop_all", "write_broken_drafter"]
