"""Tiny, seeded, CPU-only builders shared by the tests: a drafter with non-trivial weights and a
valid vocabulary map, and a stock HF Llama target. Nothing here asserts anything.

Sizes follow STYLE.md rule 12: hidden 32, vocab 128, a handful of layers.
"""
from __future__ import annotations

import inspect

import torch
import transformers as tf

from eagle_nb.model.config import DrafterConfig
from eagle_nb.model.drafter import Eagle3Drafter

H, V, VD = 32, 128, 64       # drafter width, target vocab, draft vocab
AUX_HF = [2, 4, 5]           # aux layer ids (HF hidden_states convention) for an 8-layer target


def tiny_drafter_config(**overrides) -> DrafterConfig:
    """A small valid DrafterConfig: GQA (4 heads, 2 kv heads), 3 aux layers, Vd < V."""
    kw = dict(hidden_size=H, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
              vocab_size=V, draft_vocab_size=VD, aux_layer_ids=list(AUX_HF), rms_norm_eps=1e-6,
              max_position_embeddings=64)
    kw.update(overrides)
    return DrafterConfig(**kw)


def vocab_map(vocab: int, draft_vocab: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(d2t, t2d) as the public builders make them: `draft_vocab` distinct target ids, sorted,
    stored as int64 offsets `selected[i] - i`, plus the bool mask of the selected ids."""
    g = torch.Generator().manual_seed(seed)
    selected = torch.randperm(vocab, generator=g)[:draft_vocab].sort().values
    d2t = (selected - torch.arange(draft_vocab)).to(torch.int64)
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[selected] = True
    return d2t, t2d


@torch.no_grad()
def randomize_(module: torch.nn.Module, seed: int = 0, std: float = 0.2) -> torch.nn.Module:
    """Overwrite every floating parameter with N(0, std) (norm weights: 1 + N(0, std)), so logits
    are far from flat and a wrong wiring changes them visibly."""
    g = torch.Generator().manual_seed(seed)
    for name, p in module.named_parameters():
        noise = torch.randn(p.shape, generator=g) * std
        p.copy_(1.0 + noise if "norm" in name else noise)
    return module


def tiny_drafter(seed: int = 0, vocab: int = V, draft_vocab: int = VD, **cfg_overrides) -> Eagle3Drafter:
    """An eval-mode float32 Eagle3Drafter with random weights (std 0.2) and a valid, non-identity
    d2t/t2d when draft_vocab < vocab."""
    cfg = tiny_drafter_config(vocab_size=vocab, draft_vocab_size=draft_vocab, **cfg_overrides)
    torch.manual_seed(seed)
    d = Eagle3Drafter(cfg)
    randomize_(d, seed)
    if draft_vocab < vocab:
        d2t, t2d = vocab_map(vocab, draft_vocab, seed)
        d.d2t.copy_(d2t)
        d.t2d.copy_(t2d)
    return d.eval()


def tiny_features(drafter: Eagle3Drafter, B: int = 2, T: int = 7, seed: int = 0):
    """Random (input_ids (B, T), target_features (B, T, n_aux*Ht)) for `drafter`."""
    g = torch.Generator().manual_seed(seed)
    c = drafter.config
    ids = torch.randint(0, c.vocab_size, (B, T), generator=g)
    feats = torch.randn(B, T, c.fc_in_features, generator=g)
    return ids, feats


def tiny_llama(num_layers: int = 8, hidden: int = 32, vocab: int = 128, seed: int = 0):
    """A stock HF LlamaForCausalLM (eval, float32) from a tiny random config."""
    cfg = tf.LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=num_layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    torch.manual_seed(seed)
    return tf.LlamaForCausalLM(cfg).eval()


def target_for(drafter: Eagle3Drafter, num_layers: int = 8, seed: int = 0):
    """A tiny Llama target whose input embedding equals the drafter's `embed_tokens`, so formats
    that do not store the embedding (A, B) reload to the same drafter."""
    c = drafter.config
    t = tiny_llama(num_layers, c.target_hidden_size, c.vocab_size, seed)
    with torch.no_grad():
        t.get_input_embeddings().weight.copy_(drafter.embed_tokens.weight)
    return t


def cache_kwarg(model) -> str:
    """Name of the forward kwarg carrying the KV cache: `cache` (transformers 5) or
    `past_key_values` (4.x)."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def output_cache(out):
    """The returned cache of an HF forward, whichever attribute name this version uses."""
    return out["cache"] if "cache" in out else out["past_key_values"]


# -- hooks ------------------------------------------------------------------------------------------
def hook_count(model) -> int:
    """Number of forward (pre-)hooks registered anywhere on `model`. Tests compare it before and
    after a capture block (transformers 5 leaves hooks of its own after `output_hidden_states`)."""
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


# -- rendered reports in a real browser (headless Chromium) -------------------------------------------
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync")


def find_chromium() -> str | None:
    """Path of a Chromium/Chrome executable, or None."""
    import shutil
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


def _chromium(args, timeout: int):
    import subprocess
    import tempfile
    exe = find_chromium()
    if exe is None:
        raise FileNotFoundError("no chromium executable on PATH (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=timeout)


def browser_dom(url: str, budget_ms: int = 3000, timeout: int = 120) -> str:
    """The page's DOM after its scripts ran, from headless Chromium (`--dump-dom`). A URL fragment
    such as `#fault=fc-bypass&depth=4` preselects a state of every `StaticSwitcher` on the page."""
    return _chromium([f"--virtual-time-budget={budget_ms}", "--dump-dom", url], timeout).stdout


def browser_screenshot(url: str, path, size=(1200, 4000), timeout: int = 180):
    """A PNG screenshot of the page from headless Chromium."""
    from pathlib import Path
    _chromium([f"--window-size={size[0]},{size[1]}", f"--screenshot={path}", url], timeout)
    return Path(path)


def _chromium_mark():
    import pytest
    return pytest.mark.skipif(find_chromium() is None,
                              reason="chromium not installed (Debian: apt-get install chromium)")


needs_chromium = _chromium_mark()


def shown_states(dom: str) -> list[str]:
    """data-state of every precomputed switcher state the browser left visible."""
    import re
    return [k.replace("&amp;", "&") for k, hidden in
            re.findall(r'class="enb-state" data-state="([^"]+)"( hidden(?:="")?)?', dom) if not hidden]


# -- a fake Pair for panels and switchers -----------------------------------------------------------
class FakePair:
    """Stands in for `session.Pair` (STYLE rule 12): `run` records every call and returns exact
    metrics that depend on the setting (healthy accepts every draft, any fault none); `fail` names
    faults that raise. `sweep` is Pair.sweep's contract: one `run` per setting."""

    def __init__(self, fail=()):
        self.calls: list = []
        self.layer_ids = [2, 4, 5]
        self.fail = set(fail)

    def run(self, prompts, setting=None, *, check_reference=False, progress=True):
        from eagle_nb.loop.metrics import from_stats
        from eagle_nb.experiment.results import RunResult
        from eagle_nb.loop.chain import SpecStats, VerifyStep
        s = setting
        self.calls.append(s)
        if self.fail & set(s.faults):
            raise ValueError(f"cannot apply {sorted(self.fail & set(s.faults))}")
        k = s.depth
        a = 0 if s.faults else k
        steps = [VerifyStep(a, list(range(k)), list(range(k + 1))) for _ in range(3)]
        st = SpecStats(k, s.temperature, 3, tokens=[1] * (3 * (a + 1)), steps=steps, total_s=1.0)
        wiring = {"layer_ids_hf": [i + s.layer_shift for i in self.layer_ids], "feature_mode": "aux"}
        return RunResult(s, list(prompts), ["x"] * len(prompts), [st], from_stats([st]), wiring,
                         notes=[f"{n}: note" for n in s.faults])

    def sweep(self, prompts, settings, *, progress=True):
        from eagle_nb.experiment.results import Sweep
        return Sweep(self.run(prompts, s) for s in settings)


# -- figure legibility -------------------------------------------------------------------------------
def shown_texts(fig, shown_width_px=None, dpi=None):
    """[(text, size in pt as shown, window extent)] of every visible, non-empty text of a figure.

    The figure is saved as a PNG at `dpi` pixels per inch (palette.DPI) and shown at its natural
    size, or scaled down to `shown_width_px` CSS pixels (palette.SHOWN_WIDTH_PX) if wider; one CSS
    pixel is 0.75 pt. So a text of `s` pt appears at s * dpi/96 * min(1, shown / natural) pt."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    from eagle_nb.views import palette
    dpi = dpi or palette.DPI
    shown_width_px = shown_width_px or palette.SHOWN_WIDTH_PX
    fig.set_dpi(dpi)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    natural = fig.get_figwidth() * dpi
    scale = min(1.0, shown_width_px / natural)
    out = []
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip() or t.figure is None:
            continue
        out.append((t.get_text(), t.get_fontsize() * dpi / 96 * scale, t.get_window_extent(renderer)))
    return out


def legibility_problems(fig, min_pt: float = 7.0) -> list[str]:
    """What makes a figure hard to read: text smaller than `min_pt` as shown, text cut by the
    figure's edge, and non-tick texts printed over one another."""
    from matplotlib.transforms import Bbox
    texts = shown_texts(fig)
    W, H = fig.bbox.width, fig.bbox.height
    probs = [f"{s!r} shown at {pt:.1f} pt < {min_pt} pt" for s, pt, _ in texts if pt < min_pt - 1e-6]
    ticks = {id(t) for ax in fig.axes for t in ax.get_xticklabels() + ax.get_yticklabels()}
    from matplotlib.text import Text
    objs = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip() and t.figure]
    drawn = []
    for t, (s, _, bb) in zip(objs, texts):
        inside = bb.x0 >= -1 and bb.y0 >= -1 and bb.x1 <= W + 1 and bb.y1 <= H + 1
        if id(t) in ticks and not inside:
            continue                      # a tick label matplotlib does not draw (outside the view)
        if not inside:
            probs.append(f"{s!r} cut by the figure edge ({bb.x0:.0f},{bb.y0:.0f})-({bb.x1:.0f},{bb.y1:.0f}) "
                         f"in {W:.0f}x{H:.0f}")
        drawn.append((s, bb, id(t) in ticks))
    for i, (s, bb, tick) in enumerate(drawn):
        for s2, bb2, tick2 in drawn[:i]:
            if tick and tick2:
                continue                  # tick labels of one axis: matplotlib spaces them
            inter = Bbox.intersection(bb, bb2)
            if inter is not None and inter.width > 2 and inter.height > 2:
                probs.append(f"{s!r} printed over {s2!r}")
    return probs


# -- Playwright on the system Chromium (no browser download) -------------------------------------------
def playwright_missing() -> str | None:
    """Why the Playwright tests cannot run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright not installed (pip install playwright; no browser download needed)"
    return None if find_chromium() else "chromium not installed (Debian: apt-get install chromium)"


def needs_playwright():
    import pytest
    return pytest.mark.skipif(playwright_missing() is not None, reason=str(playwright_missing()))


def launch_chromium(pw):
    """Headless system Chromium driven by Playwright, with the kit's offline flags."""
    return pw.chromium.launch(executable_path=find_chromium(), headless=True,
                              args=[f for f in CHROMIUM_FLAGS if f != "--headless"])


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
