"""eagle_nb: see why an EAGLE-3 drafter fails in serving (capture, drafter, checkpoints, speculation).

The public façade: notebooks and users import from here. Names are imported lazily so that the
CLI and `python -m eagle_nb.train` start fast.

Subpackages, in the only order in which they may import each other (a module imports from its
own subpackage or from one *above* it in this list, never below; `tests/test_layout.py` checks it):

| subpackage     | what it holds |
|----------------|---------------|
| `io/`          | safe reading of user files, prompts, weight files, the target's parts, paths, peak memory |
| `model/`       | drafter/spec configs, the fault names, hidden-state capture and layer conventions, the drafter, KV cache, targets |
| `checkpoints/` | checkpoint formats: detect, read, load, save, convert, validate; real-shaped cases |
| `loop/`        | chain and tree speculation, the one pass, verify rules, acceptance metrics, target states, timings |
| `recordings/`  | a target's recorded states: write, read, trainers' files, the step-by-step replay reference |
| `profiles/`    | speculation profiles: histogram -> rates, strict JSON, engine payloads, the tune model, step costs |
| `conditions/`  | the serving-condition registry and its measurements (templates, quantization, context, coverage, loop share) |
| `experiment/`  | `Setting`, the fault registry, the loaded `Pair` (or `RecordedPair`), results and sweeps |
| `engines/`     | the engine registry: real engines behind a process boundary, their logs, metrics, observations |
| `doctor/`      | the doctor's phases: static checks, measurement, signatures, ranking, verdict; the catalogue |
| `views/`       | every figure, table and panel (one palette) |
| `report/`      | notebooks -> HTML reports |
| `train/`       | rebuilding the shipped models |
| `cli/`         | `eagle-nb`, one module per command |

Where a new thing goes is written in `docs/architecture.md`.
"""
from importlib import import_module

_EXPORTS = {
    "capture": "model.capture", "eagle3_layers": "model.layers", "to_hf": "model.layers",
    "from_hf": "model.capture", "CapturedStates": "model.capture",
    "Eagle3Drafter": "model.drafter", "DrafterConfig": "model.config", "SpecConfig": "model.config",
    "load_target": "model.targets", "make_wrapper": "model.targets",
    "load_drafter": "checkpoints.load", "save_drafter": "checkpoints.save",
    "inspect_checkpoint": "checkpoints.inspect", "convert": "checkpoints.convert",
    "generate": "loop.chain", "greedy_reference": "loop.chain", "SpecStats": "loop.chain",
    "generate_tree": "loop.tree", "acceptance_metrics": "loop.metrics", "Recording": "recordings.recording",
    "Setting": "experiment.setting", "Pair": "experiment.pair", "open_pair": "experiment.recorded_pair",
    "RecordedPair": "experiment.recorded_pair", "record": "recordings.recording", "FAULTS": "experiment.faults",
    "TargetParts": "io.target_parts", "read_text_config": "io.target_parts",
    "diagnose": "doctor.run", "shipped_prompts": "experiment.pair", "grid": "experiment.setting",
    "read_prompts": "io.prompts", "report_value": "report.values", "report_workload": "report.values",
    "CONVENTIONS": "model.layers", "engine_style_layers": "model.decoder",
    "find_decoder_layers": "model.decoder", "vllm_log_line": "loop.metrics",
    "SHIPPED_TARGET": "io.paths", "SHIPPED_DRAFTER": "io.paths", "SHIPPED_DRAFTER_SPECULATORS": "io.paths",
    "Report": "checkpoints.validate", "check_d2t_t2d": "checkpoints.validate",
    "load_drafter_engine_style": "checkpoints.load",
    "build_seed_case": "checkpoints.seed_case", "preflight": "doctor.preflight",
    "read_train_log": "io.train_logs", "write_train_log": "io.train_logs",
    "shipped_train_accuracy": "io.train_logs",
    "SpeculationProfile": "profiles.profile", "write_profile": "profiles.profile",
    "read_profile": "profiles.profile_json", "measure_profile": "experiment.profile_run",
    "profile_from_vllm": "profiles.profile_engines", "tune": "profiles.tune", "StepCosts": "io.step_costs",
    "read_step_costs": "io.step_costs", "measure_step_costs": "profiles.batch_costs",
    "plot_tune": "views.tune_plot", "plot_engine_throughput": "views.tune_plot",
    "read_engine_throughput": "io.engine_throughput", "ENGINE_TUNE_RECORD": "io.paths",
    # serving conditions (docs/conditions.md)
    "VERIFY_RULES": "loop.verify_rules", "loop_report": "conditions.repetition",
    "prompt_coverage": "conditions.workload", "recording_coverage": "conditions.workload",
    "drafter_mask": "conditions.workload", "check_context": "conditions.context_limits",
    "context_curve": "conditions.context_curve", "long_prompts": "conditions.context_curve",
    "quantize_rtn": "conditions.quantize", "quantize_q4_1": "conditions.quantize",
    "compare_precision": "conditions.precision", "TEMPLATE_MODES": "conditions.templates",
    "render_mode": "conditions.templates", "encode_mode": "conditions.templates",
    "CONDITIONS": "conditions.registry", "condition_sweep": "experiment.condition_runs",
    "planted_requests": "conditions.workload_summary", "write_prompt_rows": "io.prompts",
    "template_kind": "conditions.templates",
}
_RENAMED = {"diagnose": "doctor"}
# Modules the notebooks use as namespaces (`plots.plot_acceptance(...)`).
_MODULES = {
    "plots": "views.plots", "model_plots": "views.model_plots", "doctor_plots": "views.doctor_plots",
    "widgets": "views.widgets", "switcher": "views.switcher", "faults": "experiment.faults",
    "conditions": "conditions.registry",
    "catalogue": "doctor.catalogue", "engines": "engines", "engine_figures": "views.engine_figures",
    "knobs": "engines.knobs",
}
__all__ = sorted([*_EXPORTS, *_MODULES])


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(import_module(f"eagle_nb.{_EXPORTS[name]}"), _RENAMED.get(name, name))
    if name in _MODULES:
        return import_module(f"eagle_nb.{_MODULES[name]}")
    raise AttributeError(f"module 'eagle_nb' has no attribute {name!r}")
