"""Memory placement: on-chip buffers -> scratchpad segments, placed statically with liveness."""

from __future__ import annotations

from typing import Dict, List, Tuple

from tilecore.diagnostics import TileCompileError
from tilecore.ir import nodes as N

from ..arch import VECTOR_DTYPES
from ..isa import SPACE_PARAM, SPACE_SEG, Segment
from .host import NpuHost

SEGMENT_ALIGN = 64


class MemoryPlacement(NpuHost):
    """Creates one segment per buffer (per stage when pipelined) and gives each a base address."""

    def _make_segments(self, body):
        """One segment per allocated buffer, and per stage for pipelined buffers (bases set later)."""
        stages = {}
        for s in self._all_stmts(body):
            if isinstance(s, N.For) and id(s) in self.pipelined:
                for b in self.pipelined[id(s)][1]:
                    stages[b] = s.num_stages
        self.allocs: Dict[str, N.Alloc] = {}
        for s in self._all_stmts(body):
            if isinstance(s, N.Alloc):
                buf = s.buffer
                self.buffers[buf.name] = buf
                self.allocs[buf.name] = s
                shape = buf.static_shape()
                if shape is None:
                    raise self.error(f"{buf.name}: on-chip buffers need static shapes", s.span)
                if buf.dtype not in VECTOR_DTYPES:
                    raise self.error(f"{buf.name}: the npu has no {buf.dtype} scratchpad elements", s.span)
                segs = []
                for k in range(stages.get(buf.name, 1)):
                    name = buf.name if k == 0 else f"{buf.name}@stage{k}"
                    segs.append(len(self.prog.segments))
                    self.prog.segments.append(Segment(name, buf.dtype, tuple(shape) or (1,), 0))
                self.bufseg[buf.name] = segs[0]
                self.stage_segs[buf.name] = segs

    def _place_segments(self):
        """Static first-fit placement with liveness; slots go above the buffers."""
        live = self.live
        cap = self.cfg.scratchpad_bytes
        slot_bytes = self.cfg.vector_chunk * 4
        reserve = len(self.slots) * slot_bytes
        order = sorted(self.allocs, key=lambda n: live.interval.get(n, (0, 0))[0])
        placed: List[Tuple[int, int, int, int]] = []  # (lo, hi, t0, t1)
        top = 0
        for name in order:
            t0, t1 = live.interval.get(name, (0, 0))
            for sid in self.stage_segs[name]:
                seg = self.prog.segments[sid]
                size = -(-seg.nbytes // SEGMENT_ALIGN) * SEGMENT_ALIGN
                off = 0
                for lo, hi, a, b in sorted(placed):
                    if a <= t1 and t0 <= b and off < hi and lo < off + size:
                        off = -(-hi // SEGMENT_ALIGN) * SEGMENT_ALIGN
                if off + size > cap - reserve:
                    live_now = sum(hi - lo for lo, hi, a, b in placed if a <= t1 and t0 <= b)
                    stages = len(self.stage_segs[name])
                    raise TileCompileError(
                        f"scratchpad overflow on npu: {name} needs {seg.nbytes} bytes"
                        f"{f' (x{stages} stages for T.Pipelined)' if stages > 1 else ''}, but "
                        f"{live_now} bytes of buffers are live here and compiler temporaries take "
                        f"{reserve}; the core has {cap} bytes of scratchpad",
                        self.allocs[name].span,
                        self.source,
                    )
                seg.base = off
                placed.append((off, off + size, t0, t1))
                top = max(top, off + size)
        for i, sid in enumerate(self.slots):
            self.prog.segments[sid].base = top + i * slot_bytes
        if top + reserve > cap:
            raise TileCompileError(
                f"scratchpad overflow on npu: buffers take {top} bytes and vector "
                f"temporaries {reserve}; the core has {cap}",
                self.func.kernel.span,
                self.source,
            )

    def _space(self, buf: N.Buffer):
        """(address space, index) of `buf`: its parameter for globals, its current segment otherwise."""
        if buf.scope == "global":
            return SPACE_PARAM, self.params[buf.name]
        if buf.name not in self.bufseg:
            raise self.error(f"{buf.name} is used before it is allocated")
        return SPACE_SEG, self.bufseg[buf.name]
