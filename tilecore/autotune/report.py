"""What a tuning run found: every candidate's fate, and the winner."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

# A candidate's status. Only "ok" candidates are timed and can win.
OK = "ok"
INVALID = "invalid config"  # the factory rejected the configuration (Python or Tile error)
COMPILE_ERROR = "compile error"  # the compiler reported an error
CRASHED = "compiler crashed"  # the compiling process died (signal, abort)
TIMEOUT = "timed out"  # compiling took longer than `timeout` seconds
RUN_ERROR = "run error"  # the compiled kernel failed when it ran
WRONG = "wrong result"  # its output differs from the reference


@dataclass
class Candidate:
    """One configuration: its status, why it was skipped, and its time when it ran."""

    index: int
    config: Dict[str, Any]
    status: str = OK
    message: str = ""
    compile_s: Optional[float] = None
    median_ms: Optional[float] = None
    spread_pct: Optional[float] = None
    runoff: bool = False  # timed again among the fastest (its median is from that run-off)

    def line(self) -> str:
        text = f"#{self.index:<3} {_config_text(self.config):<48} "
        if self.status == OK and self.median_ms is not None:
            mark = "  run-off" if self.runoff else ""
            return text + f"{self.median_ms:10.4g} ms  (IQR {self.spread_pct:.1f}%){mark}"
        return text + f"SKIPPED: {self.status}: {self.message.splitlines()[0] if self.message else ''}"

    def to_dict(self) -> Dict[str, Any]:
        return dict(self.__dict__)


def fastest(timed: List[Candidate]) -> Candidate:
    """The winner among timed candidates: the fastest of the run-off when there was one (the
    others' medians come from the first, noisier pass and do not compete with it)."""
    finalists = [c for c in timed if c.runoff] or timed
    return min(finalists, key=lambda c: c.median_ms if c.median_ms is not None else float("inf"))


def _config_text(config: Dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in config.items())


@dataclass
class TuningReport:
    """The outcome of tuning one kernel for one key: candidates in config order and the winner.

    from_cache: the winner was loaded from the tuning cache (no candidate compiled or
    timed; `candidates` then holds only the winner). method: how times were measured.
    """

    kernel: str
    target: str
    device: str
    method: str = ""
    candidates: List[Candidate] = field(default_factory=list)
    best_index: Optional[int] = None
    from_cache: bool = False
    tuning_s: float = 0.0
    key: str = ""
    best_ir: str = field(default="", repr=False)  # the winner's Tile IR as JSON (stored with it)

    @property
    def best(self) -> Optional[Candidate]:
        for c in self.candidates:
            if c.index == self.best_index:
                return c
        return None

    @property
    def best_config(self) -> Optional[Dict[str, Any]]:
        best = self.best
        return dict(best.config) if best is not None else None

    @property
    def skipped(self) -> List[Candidate]:
        return [c for c in self.candidates if c.status != OK]

    def summary(self) -> str:
        """A table of every candidate and the winner, as printed after tuning."""
        head = (
            f"autotune {self.kernel} on {self.target} ({self.device}, {self.method})"
            if not self.from_cache
            else f"autotune {self.kernel} on {self.target} ({self.device}): loaded from the tuning cache"
        )
        lines = [head]
        lines += ["  " + c.line() for c in self.candidates]
        best = self.best
        if best is not None:
            lines.append(
                f"  best: #{best.index} {_config_text(best.config)}"
                + (f" at {best.median_ms:.4g} ms" if best.median_ms is not None else "")
            )
        if not self.from_cache:
            lines.append(
                f"  {len(self.candidates) - len(self.skipped)} of {len(self.candidates)} "
                f"candidates timed, {len(self.skipped)} skipped; tuning took {self.tuning_s:.1f} s"
            )
        return "\n".join(lines)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "kernel": self.kernel,
            "target": self.target,
            "device": self.device,
            "method": self.method,
            "best_index": self.best_index,
            "from_cache": self.from_cache,
            "tuning_s": self.tuning_s,
            "key": self.key,
            "candidates": [c.to_dict() for c in self.candidates],
        }
