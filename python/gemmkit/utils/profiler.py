"""python/gemmkit/utils/profiler.py: gemmkit.utils.profiler.CUDAEventProfiler, a plan's launches timed with CUDA events
(the reference's class of that name; torch provides the events).

    duration_ms = CUDAEventProfiler(plan, 10, 50, A, B, C, D, visitor_args=args)()   # the mean per launch
"""
from __future__ import annotations

from typing import Any, Protocol

__all__ = ["CUDAEventProfiler"]


def __dir__() -> list[str]:
    """dir() shows the API; the typing helpers stay attributes, unlisted."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})


class _Runs(Protocol):
    def run(self, *args: Any, **kwargs: Any) -> object: ...


class CUDAEventProfiler:
    """Times `op.run(*args, **kwargs)`: the constructor runs it once (compiling the kernel on first use and checking
    the tensors); calling the profiler launches it `warmup_iterations` times, then `iterations` times between two
    CUDA events on the launches' stream (kwargs' torch stream, else torch's current one), and returns the mean
    milliseconds per launch. Outputs are rewritten by every launch. Needs torch when called."""

    def __init__(self, op: _Runs, warmup_iterations: int = 500, iterations: int = 500, *args: Any,
                 **kwargs: Any) -> None:
        self.op = op
        self.warmup_iterations = warmup_iterations
        self.iterations = iterations
        self.args = args
        self.kwargs = kwargs
        op.run(*args, **kwargs)

    def __call__(self) -> float:
        try:
            import torch
        except ImportError as error:
            raise RuntimeError("CUDAEventProfiler times with torch's CUDA events; install torch to call it.") from error
        stream = self.kwargs.get("stream")
        stream = stream if isinstance(stream, torch.cuda.Stream) else torch.cuda.current_stream()
        launch = {**self.kwargs, "sync": False}  # the events time the GPU's work, not a sync per launch
        launch.pop("print_module", None)
        for _ in range(self.warmup_iterations):
            self.op.run(*self.args, **launch)
        event: Any = torch.cuda.Event  # typed in some torch releases, not in others (2.15)
        start, stop = event(enable_timing=True), event(enable_timing=True)
        start.record(stream)
        for _ in range(self.iterations):
            self.op.run(*self.args, **launch)
        stop.record(stream)
        stop.synchronize()
        return float(start.elapsed_time(stop)) / self.iterations
