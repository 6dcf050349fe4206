"""Time every attention variant side by side: ``python benchmarks/variants.py``.

Rows: the book's :class:`~attention.MultiHeadAttention`, ``torch.nn.MultiheadAttention``,
every class in :data:`attention.efficient.VARIANTS`, and a *bare reference*: one fused
projection, ``scaled_dot_product_attention`` and the output projection as plain
functional calls, the fastest this can be written without leaving PyTorch. All rows
hold the same weights (GPT-2 has ``qkv_bias=True``, so they do too) and no dropout.

Each row is timed forward under ``torch.no_grad()`` in eval mode, and forward plus
backward in train mode, at the GPT-2-small shape by default (batch 8, 1024 tokens,
768 dimensions, 12 heads, float32; bfloat16 too on CUDA). How:

* **Interleaved rounds.** Round ``r`` runs every (row, mode) once, in an order
  shuffled with seed ``seed + r``, so that drift in the machine's speed (other jobs,
  heat, frequency scaling) hits every row alike. The first ``--warmup`` rounds are
  discarded; the medians and interquartile ranges of the rest are reported.
* **Ratios measured side by side**, against the bare reference and against the
  book's module, from the same rounds.
* **Roofline.** The median rate of a ``2048 x 2048 x 2048`` matrix product, timed
  once per round beside the rows, is the attainable FLOP/s; each row is also shown
  as the fraction of it that its *useful* FLOPs reach (see :func:`forward_flops`).
  A row that computes more (the book's module computes the whole score matrix,
  masked half included) is not credited for the extra work.
* **Sequence-length sweep.** Time, and peak memory above the resting level, for
  128 to 4096 tokens (batch ``--sweep-batch``, 1 by default, so that the book's
  quadratic score matrices fit in memory). Memory is measured in a fresh process:
  on CUDA with ``torch.cuda.max_memory_allocated``; on a CPU from the process's
  peak resident set (``VmHWM``, reset before each step through
  ``/proc/self/clear_refs``), with glibc told to return every block above 64 KiB
  to the system when it is freed, so the peak is not hidden by reused memory.

Usage::

    python benchmarks/variants.py             # GPT-2 small's shape
    python benchmarks/variants.py --quick     # a reduced run: does everything work?
    python benchmarks/variants.py --help      # every option

Results (environment, settings, every raw time) go to ``--out/results.json`` with
plots of time and memory against sequence length. A summary table with the
project's targets for :class:`~attention.efficient.FastMultiHeadAttention` is
printed; a missed target is reported, not an error: this is a measurement.

The FLOP count is the package's :func:`attention.efficient.forward_flops`, and the
modules come from :func:`attention.efficient.variants_of`, so the chapter's race and
this benchmark time the same things.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import functools
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import harness
import torch
from torch import nn
from torch.nn import functional as F

from attention import MultiHeadAttention
from attention.efficient import forward_flops, variants_of

BARE = "bare reference"
BOOK = "MultiHeadAttention"
TORCH_MHA = "torch.nn.MultiheadAttention"
RECOMMENDED = "FastMultiHeadAttention"
MODES = ("forward", "forward+backward")
#: Backward costs about twice the forward's FLOPs (a gradient for each operand of
#: every product), so forward + backward counts as three forwards.
TRAIN_FLOP_FACTOR = 3
#: The project's targets for RECOMMENDED (see ``_targets``).
MAX_VS_BARE, MAX_VS_BOOK, MIN_ROOFLINE, MAX_MEMORY_EXPONENT = 1.05, 0.5, 0.70, 1.3

FULL = {
    "batch": 8,
    "tokens": 1024,
    "d_model": 768,
    "heads": 12,
    "repeats": 10,
    "warmup": 2,
    "sweep_batch": 1,
    "sweep_max": 4096,
    "sweep_repeats": 3,
    "matmul_size": 2048,
}
QUICK = {
    **FULL,
    "batch": 2,
    "tokens": 256,
    "d_model": 256,
    "heads": 4,
    "repeats": 5,
    "warmup": 1,
    "sweep_max": 512,
    "sweep_repeats": 2,
    "matmul_size": 1024,
}


def summarize(times: list[float]) -> dict[str, float]:
    """Median, quartiles and extremes of ``times``.

    Examples
    --------
    >>> summarize([3.0, 1.0, 2.0, 10.0])
    {'median_s': 2.5, 'q1_s': 1.75, 'q3_s': 4.75, 'min_s': 1.0, 'max_s': 10.0}
    """
    spread = harness.quartiles(times, method="inclusive")  # one time is its own IQR
    return {f"{k}_s": v for k, v in spread.items()} | {"min_s": min(times), "max_s": max(times)}


# ---------------------------------------------------------------------------------------
# The rows
# ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class Row:
    """One thing to time: ``call(x) -> y`` and the parameters whose gradients it fills."""

    name: str
    call: Callable[[torch.Tensor], torch.Tensor]
    params: list[torch.Tensor]
    module: nn.Module | None = None  # switched between train() and eval(), if any


def _bare_reference(fast: nn.Module) -> Row:
    """FastMultiHeadAttention's computation as plain function calls, on copies of its weights."""

    def leaf(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else t.detach().clone().requires_grad_()

    w_qkv, b_qkv = leaf(fast.qkv.weight), leaf(fast.qkv.bias)
    w_out, b_out = leaf(fast.out_proj.weight), leaf(fast.out_proj.bias)
    heads = fast.num_heads

    def call(x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        qkv = F.linear(x, w_qkv, b_qkv).view(B, T, 3, heads, -1).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # each (B, heads, T, head_dim)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return F.linear(y.transpose(1, 2).reshape(B, T, -1), w_out, b_out)

    return Row(BARE, call, [t for t in (w_qkv, b_qkv, w_out, b_out) if t is not None])


def _torch_multihead(adapter: nn.Module, device: torch.device) -> Row:
    mha = adapter.mha
    future = adapter.mask.to(device)

    def call(x: torch.Tensor) -> torch.Tensor:
        return mha(x, x, x, attn_mask=future, need_weights=False, is_causal=True)[0]

    return Row(TORCH_MHA, call, list(mha.parameters()), mha)


def build_rows(
    d_model: int,
    heads: int,
    tokens: int,
    device: torch.device,
    dtype: torch.dtype,
    seed: int,
    names: list[str] | None = None,
) -> list[Row]:
    """Every row, all with the weights of one ``MultiHeadAttention(d_model, d_model)``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        book = MultiHeadAttention(d_model, d_model, tokens, 0.0, heads, qkv_bias=True)
    modules = variants_of(book.to(device=device, dtype=dtype))
    rows = [Row(name, m, list(m.parameters()), m) for name, m in modules.items()]
    # The same order as ever: the bare reference, the book, torch's module, the variants.
    rows[0:0] = [_bare_reference(modules[RECOMMENDED])]
    rows.insert(2, _torch_multihead(modules["TorchMHAAdapter"], device))
    return [row for row in rows if names is None or row.name in names]


# ---------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------


def _synchronizer(device: torch.device) -> Callable[[], None]:
    return (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)


def _prepare(row: Row, mode: str, x: torch.Tensor) -> None:
    """Put ``row`` in ``mode``'s state: train or eval, and no gradients before backward."""
    if row.module is not None:
        row.module.train(mode != "forward")
    if mode != "forward":
        _clear_grads(row, x)  # a training step starts with zero_grad(set_to_none=True)


def _step(row: Row, mode: str, x: torch.Tensor, grad: torch.Tensor) -> Callable[[], None]:
    """Put ``row`` in ``mode``'s state and return the call to time."""
    _prepare(row, mode, x)
    if mode == "forward":

        def forward() -> None:
            with torch.no_grad():
                row.call(x)

        return forward
    return lambda: row.call(x).backward(grad)


def _clear_grads(row: Row, x: torch.Tensor) -> None:
    for p in [*row.params, x]:
        if p is not None:
            p.grad = None


def _inputs(
    batch: int, tokens: int, d_model: int, device: torch.device, dtype: torch.dtype, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """An input, a copy of it that requires grad, and the output gradient for backward."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, tokens, d_model, generator=generator).to(device=device, dtype=dtype)
    grad = torch.randn(batch, tokens, d_model, generator=generator).to(device=device, dtype=dtype)
    return x, x.clone().requires_grad_(), grad


def time_rows(
    rows: list[Row],
    shape: tuple[int, int, int],
    device: torch.device,
    dtype: torch.dtype,
    *,
    warmup: int,
    repeats: int,
    seed: int,
    label: str,
    progress: Callable[[str], None],
    extra: dict[str, Callable[[], object]] | None = None,
) -> dict[str, dict[str, dict[str, list[float]]]]:
    """Seconds per name and mode, ``{"times_s": [...], "warmup_s": [...]}``, interleaved.

    ``extra`` maps more names to calls timed once per round beside the rows, under the
    mode ``"call"`` (the roofline matmul, so that it sees the same machine as they do).
    """
    x, x_train, grad = _inputs(*shape, device, dtype, seed)
    inputs = {"forward": x, "forward+backward": x_train}
    steps, states = {}, {}
    for row in rows:
        for mode in MODES:
            steps[row.name, mode] = _step(row, mode, inputs[mode], grad)
            states[row.name, mode] = functools.partial(_prepare, row, mode, inputs[mode])
    for name, call in (extra or {}).items():
        steps[name, "call"] = call
    sync = _synchronizer(device)

    def before(key: tuple[str, str]) -> None:  # outside the timed region
        if key in states:
            states[key]()  # mode switch and zero_grad
        sync()

    def synced(step: Callable[[], object]) -> Callable[[], None]:
        return lambda: (step(), sync())

    def progress_after(r: int) -> None:
        kind = "warm-up" if r < warmup else "timed"
        progress(f"{label}: round {r + 1}/{warmup + repeats} ({kind})")

    timed = harness.paired_rounds(
        {key: synced(step) for key, step in steps.items()},
        repeats,
        warmup=warmup,
        order=harness.shuffled(seed),
        before=before,
        after_round=progress_after,
        quiet_gc=True,
    )
    times: dict = {}
    for name, mode in steps:
        times.setdefault(name, {})[mode] = {
            "times_s": timed.times[name, mode],
            "warmup_s": timed.warmup[name, mode],
        }
    return times


def _matmul(device: torch.device, dtype: torch.dtype, size: int) -> Callable[[], object]:
    """A ``size``-cubed matrix product: its rate is the roofline for the rows."""
    generator = torch.Generator().manual_seed(0)
    a, b = (torch.randn(size, size, generator=generator).to(device, dtype) for _ in range(2))
    return lambda: a @ b


# ---------------------------------------------------------------------------------------
# Peak memory, in a fresh process
# ---------------------------------------------------------------------------------------


def _proc_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _reset_cpu_peak() -> bool:
    """Free what glibc holds, then reset VmHWM to the current RSS; False where unsupported."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    try:
        Path("/proc/self/clear_refs").write_text("5")  # 5: reset the peak RSS (Linux >= 4.0)
        return True
    except OSError:
        return False


def _peak_bytes(step: Callable[[], None], device: torch.device) -> int | None:
    """Peak memory of ``step()`` above what was in use before it."""
    step()  # warm-up: one-time buffers (thread pools, kernel caches) are not the step's
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - base
    if device.type != "cpu" or not _reset_cpu_peak():
        return None
    base = _proc_kib("VmRSS")
    step()
    return max(0, _proc_kib("VmHWM") - base) * 1024


def memory_worker(spec: dict) -> dict[str, dict[str, dict[str, int | None]]]:
    """Peak bytes per row, length and mode; run by ``--memory-worker`` in a fresh process."""
    device, dtype = torch.device(spec["device"]), getattr(torch, spec["dtype"])
    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    peaks: dict = {name: {} for name in spec["rows"]}
    for tokens in spec["lengths"]:
        shape = (spec["batch"], tokens, spec["d_model"])
        x, x_train, grad = _inputs(*shape, device, dtype, spec["seed"])
        rows = build_rows(
            spec["d_model"], spec["heads"], tokens, device, dtype, spec["seed"], spec["rows"]
        )
        for row in rows:
            peaks[row.name][str(tokens)] = per_mode = {}
            for mode in MODES:
                step = _step(row, mode, x if mode == "forward" else x_train, grad)

                def run(step: Callable[[], None] = step, row: Row = row, x=x_train) -> None:
                    step()
                    _clear_grads(row, x)  # so the resting level holds no gradients

                per_mode[mode] = _peak_bytes(run, device)
        del rows
    return peaks


def measure_memory(spec: dict, progress: Callable[[str], None]) -> dict:
    """Run :func:`memory_worker` in a fresh Python process and return what it found."""
    progress(f"memory: {len(spec['rows'])} rows x {len(spec['lengths'])} lengths, fresh process")
    # Every block over 64 KiB gets its own mapping, returned on free, so the resident
    # set tracks what is really in use.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    command = [sys.executable, __file__, "--memory-worker", json.dumps(spec)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        error = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        progress(f"memory: the worker failed ({error[0]}); no memory results")
        return {"error": error[0]}
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------


def environment(device: torch.device) -> dict:
    cpu = harness.cpu_model()
    return {
        "date": harness.now(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else cpu,
        "cpu_model": cpu,
        "cpu_count": os.cpu_count(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "load_average_at_start": harness.load_average(),
    }


def _with_ratios(times: dict, flops: int, rate: float) -> list[dict]:
    """Each row's statistics, ratios to the bare reference and the book, and roofline share."""
    stats = {name: {m: summarize(t[m]["times_s"]) for m in MODES} for name, t in times.items()}
    rows = []
    for name, per_mode in times.items():
        row = {"name": name}
        for mode in MODES:
            median = stats[name][mode]["median_s"]
            mode_flops = flops * (TRAIN_FLOP_FACTOR if mode != "forward" else 1)
            row[mode] = {
                **per_mode[mode],
                **stats[name][mode],
                "flops": mode_flops,
                "vs_bare": median / stats[BARE][mode]["median_s"] if BARE in stats else None,
                "vs_book": median / stats[BOOK][mode]["median_s"] if BOOK in stats else None,
                "roofline_fraction": mode_flops / median / rate,
            }
        rows.append(row)
    return rows


def _exponent(memory: dict, name: str) -> tuple[float, int, int] | None:
    """Growth exponent of ``name``'s forward+backward peak between the two longest lengths."""
    points = [
        (int(t), p["forward+backward"])
        for t, p in memory.get(name, {}).items()
        if p.get("forward+backward")
    ]
    if len(points) < 2:
        return None
    (t1, m1), (t2, m2) = sorted(points)[-2:]
    return math.log(m2 / m1) / math.log(t2 / t1), t1, t2


def _targets(run: dict) -> list[dict]:
    """The project's targets for RECOMMENDED, each with its measured value and a verdict."""
    rows = {row["name"]: row for row in run["rows"]}
    if RECOMMENDED not in rows or BOOK not in rows or BARE not in rows:
        return []
    targets = []
    for mode in MODES:
        m = rows[RECOMMENDED][mode]
        bare, book, roof = m["vs_bare"], m["vs_book"], m["roofline_fraction"]
        targets += [
            {"check": f"{mode:<16} {bare:.2f}x the bare reference",
             "target": f"<= {MAX_VS_BARE}x", "value": bare, "passed": bare <= MAX_VS_BARE},
            {"check": f"{mode:<16} {book:.2f}x the book's MultiHeadAttention",
             "target": f"<= {MAX_VS_BOOK}x", "value": book, "passed": book <= MAX_VS_BOOK},
            {"check": f"{mode:<16} {roof:.0%} of the matmul roofline",
             "target": f">= {MIN_ROOFLINE:.0%}", "value": roof, "passed": roof >= MIN_ROOFLINE},
        ]  # fmt: skip
    growth = _exponent(run.get("memory", {}), RECOMMENDED)
    if growth is not None:
        exponent, t1, t2 = growth
        targets.append({
            "check": f"peak memory grows as tokens^{exponent:.2f} from {t1} to {t2} tokens",
            "target": f"linear, exponent <= {MAX_MEMORY_EXPONENT}",
            "value": exponent,
            "passed": exponent <= MAX_MEMORY_EXPONENT,
        })  # fmt: skip
    return targets


def print_summary(results: dict) -> None:
    env, s = results["environment"], results["settings"]
    print(
        f"\nAttention benchmark: batch {s['batch']} x {s['tokens']} tokens x {s['d_model']} "
        f"dims, {s['heads']} heads, on {env['device']} ({env['device_name']}), "
        f"{env['threads']} threads, torch {env['torch']}"
    )
    loads = [env.get(k) or [] for k in ("load_average_at_start", "load_average_at_end")]
    shown = [" ".join(f"{load:.1f}" for load in three) or "n/a" for three in loads]
    print(f"Load average (1, 5, 15 min) at start: {shown[0]}; at end: {shown[1]}")
    for run in results["runs"]:
        rate = run["matmul"]["flops_per_s"]
        print(
            f"\n{run['dtype']}: matmul roofline {rate / 1e9:.1f} GFLOP/s "
            f"({run['matmul']['size']}^3); forward {run['forward_flops'] / 1e9:.2f} GFLOP, "
            f"forward+backward {TRAIN_FLOP_FACTOR}x that. IQR: interquartile range / median."
        )
        print(f"{'':<28}" + "".join(f"| {mode:<38}" for mode in MODES))
        print(
            f"{'row':<28}"
            + f"| {'median ms':>10} {'IQR':>5} {'xbare':>6} {'xbook':>6} {'roof':>5}  " * 2
        )
        for row in run["rows"]:
            cells = ""
            for mode in MODES:
                m = row[mode]
                iqr = (m["q3_s"] - m["q1_s"]) / m["median_s"]
                cells += (
                    f"| {m['median_s'] * 1e3:>10.2f} {iqr:>5.0%} {m['vs_bare']:>6.2f} "
                    f"{m['vs_book']:>6.2f} {m['roofline_fraction']:>5.0%}  "
                )
            print(f"{row['name']:<28}" + cells)
        memory = run.get("memory", {})
        if memory and "error" not in memory:
            print(f"\nPeak memory above rest, forward+backward, batch {s['sweep_batch']} (MiB):")
            lengths = sorted({int(t) for per in memory.values() for t in per})
            print(f"{'row':<28}" + "".join(f"{t:>9}" for t in lengths))
            for name, per in memory.items():
                values = [per.get(str(t), {}).get("forward+backward") for t in lengths]
                print(
                    f"{name:<28}"
                    + "".join(
                        f"{v / 2**20:>9.1f}" if v is not None else f"{'n/a':>9}" for v in values
                    )
                )
        if run["targets"]:
            print(f"\nTargets for {RECOMMENDED} ({run['dtype']}):")
            if (s["batch"], s["tokens"], s["d_model"], s["heads"]) != (8, 1024, 768, 12):
                print(
                    "  (the targets are set for GPT-2 small: batch 8 x 1024 tokens x 768 dims, "
                    "12 heads;\n  at a smaller shape, such as --quick's, fixed overheads weigh "
                    "more and MISS is expected)"
                )
            for t in run["targets"]:
                mark = "PASS" if t["passed"] else "MISS"
                print(f"  [{mark}] {t['check']} (target {t['target']})")


def plot(results: dict, out: Path) -> list[Path]:
    """Log-log plots of time and peak memory against sequence length, one file per dtype."""
    try:
        from matplotlib.figure import Figure
    except ModuleNotFoundError:
        return []
    written = []
    for run in results["runs"]:
        for what, data, unit, scale in (
            ("time", run["sweep"].get("median_s", {}), "seconds", 1.0),
            ("memory", run.get("memory", {}), "peak MiB above rest", 2**-20),
        ):
            if not data or "error" in data:
                continue
            fig = Figure(figsize=(11, 4.5), layout="constrained")
            for ax, mode in zip(fig.subplots(1, 2), MODES, strict=True):
                for name, per_length in data.items():
                    points = sorted(
                        (int(t), v[mode] * scale) for t, v in per_length.items() if v.get(mode)
                    )
                    if points:
                        style = "-" if name in (RECOMMENDED, BARE, BOOK) else "--"
                        ax.plot(*zip(*points, strict=True), style, marker="o", label=name)
                ax.set(xscale="log", yscale="log", xlabel="tokens", ylabel=unit, title=mode)
                ax.set_xscale("log", base=2)
                ax.grid(True, which="both", alpha=0.3)
            fig.axes[0].legend(fontsize="small")
            fig.suptitle(
                f"{what} against sequence length, batch "
                f"{results['settings']['sweep_batch']}, {run['dtype']}"
            )
            path = out / f"{what}_vs_tokens_{run['dtype']}.png"
            fig.savefig(path, dpi=120)
            written.append(path)
    return written


# ---------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/variants.py",
        description="Time every attention variant side by side (see the module docstring).",
    )
    add = parser.add_argument
    add("--batch", type=int, help=f"batch size (default {FULL['batch']})")
    add("--tokens", type=int, help=f"sequence length (default {FULL['tokens']})")
    add("--d-model", type=int, help=f"embedding size d_in = d_out (default {FULL['d_model']})")
    add("--heads", type=int, help=f"number of heads (default {FULL['heads']})")
    add("--repeats", type=int, help=f"timed rounds (default {FULL['repeats']})")
    add("--warmup", type=int, help=f"discarded rounds first (default {FULL['warmup']})")
    add(
        "--sweep-batch",
        type=int,
        help="batch size of the sequence-length sweep (default 1; the book's module holds "
        "several batch x heads x tokens^2 matrices: 0.8 GB each per batch element at 4096 "
        "tokens and 12 heads)",
    )
    add("--sweep-max", type=int, help="longest sweep length; 0 skips the sweep (default 4096)")
    add("--sweep-repeats", type=int, help="timed rounds per sweep length (default 3)")
    add("--matmul-size", type=int, help="size of the roofline matmul (default 2048)")
    add(
        "--quick",
        action="store_true",
        help="a reduced run for checking that everything works: batch 2 x 256 tokens x 256 "
        "dims, 4 heads, 5 rounds, sweep to 512 tokens, 1024^3 matmul; flags given win",
    )
    add("--device", help="cpu or cuda (default: cuda when available)")
    add("--threads", type=int, help="torch.set_num_threads (default: torch's choice)")
    add("--seed", type=int, default=0, help="weights, inputs and round orders (default 0)")
    add("--out", type=Path, default=Path("bench-results"), help="results folder")
    add("--memory-worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name, default in (QUICK if args.quick else FULL).items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    if args.d_model % args.heads:
        parser.error(f"--d-model {args.d_model} must be divisible by --heads {args.heads}")
    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if torch.device(args.device).type not in ("cpu", "cuda"):
        parser.error(f"--device must be cpu or cuda, got {args.device}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("--device cuda, but CUDA is not available")
    return args


def main(argv: list[str] | None = None) -> int:
    # Everything allocated so far (torch's modules) lives to the end: keep it out of the
    # collections between rounds, which would otherwise take a good part of a second.
    gc.freeze()
    try:
        return _main(parse_args(argv))
    finally:
        gc.unfreeze()


def _main(args: argparse.Namespace) -> int:
    if args.memory_worker:
        print(json.dumps(memory_worker(json.loads(args.memory_worker))))
        return 0
    started = time.perf_counter()

    def progress(message: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f} s] {message}", file=sys.stderr, flush=True)

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtypes = [torch.float32] + ([torch.bfloat16] if device.type == "cuda" else [])
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    del settings["memory_worker"]
    del settings["out"]  # a local path, meaningless in a committed results file
    results = {
        "environment": environment(device),
        "settings": settings,
        "flop_convention": " ".join(forward_flops.__doc__.split("\n\n")[1].split()),
        "memory_method": (
            "torch.cuda.max_memory_allocated above memory_allocated, in a fresh process"
            if device.type == "cuda"
            else "VmHWM (reset through /proc/self/clear_refs) above VmRSS, in a fresh "
            "process with MALLOC_MMAP_THRESHOLD_=65536, after one warm-up step"
        ),
        "runs": [],
    }
    shape = (args.batch, args.tokens, args.d_model)
    lengths = [2**k for k in range(7, 13) if 2**k <= args.sweep_max]
    for dtype in dtypes:
        label = str(dtype).removeprefix("torch.")
        rows = build_rows(args.d_model, args.heads, args.tokens, device, dtype, args.seed)
        times = time_rows(
            rows, shape, device, dtype, warmup=args.warmup, repeats=args.repeats,
            seed=args.seed, label=f"{label} main", progress=progress,
            extra={"matmul": _matmul(device, dtype, args.matmul_size)},
        )  # fmt: skip
        del rows
        matmul = times.pop("matmul")["call"]
        rate = 2 * args.matmul_size**3 / statistics.median(matmul["times_s"])
        run = {"dtype": label, "matmul": {"size": args.matmul_size, **matmul, "flops_per_s": rate}}
        run["forward_flops"] = forward_flops(*shape, args.d_model, args.heads)
        run["rows"] = _with_ratios(times, run["forward_flops"], rate)
        run["sweep"] = {"batch": args.sweep_batch, "lengths": lengths, "raw": {}, "median_s": {}}
        for tokens in lengths:
            rows = build_rows(args.d_model, args.heads, tokens, device, dtype, args.seed)
            raw = time_rows(
                rows, (args.sweep_batch, tokens, args.d_model), device, dtype, warmup=1,
                repeats=args.sweep_repeats, seed=args.seed, label=f"{label} sweep {tokens}",
                progress=progress,
            )  # fmt: skip
            for name, per_mode in raw.items():
                run["sweep"]["raw"].setdefault(name, {})[str(tokens)] = per_mode
                run["sweep"]["median_s"].setdefault(name, {})[str(tokens)] = {
                    mode: statistics.median(per_mode[mode]["times_s"]) for mode in MODES
                }
            del rows
        if lengths:
            spec = {
                "device": args.device, "dtype": label, "batch": args.sweep_batch,
                "d_model": args.d_model, "heads": args.heads, "lengths": lengths,
                "rows": [row["name"] for row in run["rows"]], "seed": args.seed,
                "threads": torch.get_num_threads(),
            }  # fmt: skip
            run["memory"] = measure_memory(spec, progress)
        run["targets"] = _targets(run)
        results["runs"].append(run)
    results["environment"]["load_average_at_end"] = harness.load_average()
    results["environment"]["seconds"] = time.perf_counter() - started
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    written = plot(results, args.out)
    print_summary(results)
    print(f"\nWrote {args.out / 'results.json'}" + "".join(f", {p}" for p in written))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
