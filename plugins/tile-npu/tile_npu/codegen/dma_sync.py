"""DMA synchronization: in-flight transfers and the `wait`s that order them before their data is used."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Set

from tilecore.ir import nodes as N
from tilecore.ir.visitor import walk

from ..isa import SPACE_PARAM, SPACE_SEG
from .host import NpuHost


@dataclass
class PendingDMA:
    """A DMA issued but not yet waited for, with the segments and tensors it touches."""

    token: int  # register holding the token
    seg_writes: Set[int] = field(default_factory=set)
    seg_reads: Set[int] = field(default_factory=set)
    dram_writes: Set[int] = field(default_factory=set)
    dram_reads: Set[int] = field(default_factory=set)


class DmaSync(NpuHost):
    """Tracks pending DMAs; `sync` waits exactly for those that conflict with an access."""

    def sync(self, reads=(), writes=()):
        """Wait for in-flight DMAs that conflict with reading `reads` / writing `writes` (Buffers)."""
        if not self.pending:
            return
        rs = {self._space(b) for b in reads}
        ws = {self._space(b) for b in writes}
        keep = []
        for p in self.pending:
            conflict = False
            for sp, sid in rs | ws:
                if sp == SPACE_SEG and self._aliases(sid, p.seg_writes) or sp == SPACE_PARAM and sid in p.dram_writes:
                    conflict = True
            for sp, sid in ws:
                if sp == SPACE_SEG and self._aliases(sid, p.seg_reads) or sp == SPACE_PARAM and sid in p.dram_reads:
                    conflict = True
            if conflict:
                self.emit("wait", r=(p.token,))
                self.release(p.token)
            else:
                keep.append(p)
        self.pending = keep

    def _aliases(self, sid, sids) -> bool:
        """Whether segment `sid` may share bytes with any of `sids`.

        Placement happens after code generation, so any two buffers that are not
        live at the same time may be given the same bytes: treat them as aliases.
        """
        if sid in sids:
            return True
        name = self._seg_buffer.get(sid)
        if name is None:
            return False
        lo, hi = self.live.interval.get(name, (0, 0))
        for other in sids:
            oname = self._seg_buffer.get(other)
            if oname is None or oname == name:
                continue
            a, b = self.live.interval.get(oname, (0, 0))
            if not (a <= hi and lo <= b):
                return True
        return False

    def sync_all(self):
        """Wait for every DMA still in flight."""
        for p in self.pending:
            self.emit("wait", r=(p.token,))
            self.release(p.token)
        self.pending = []

    def _bufs_in(self, *nodes) -> List[N.Buffer]:
        """Every Buffer referenced in the given nodes (None and non-nodes are skipped)."""
        out = []
        for node in nodes:
            if node is None or not hasattr(node, "__dataclass_fields__"):
                continue
            for n in walk(node):
                if isinstance(n, N.Buffer):
                    out.append(n)
        return out

    def _track(self, tok, reads=(), writes=()):
        """Record DMA `tok` as in flight with the buffers it reads and writes."""
        p = PendingDMA(tok)
        for b in reads:
            sp, sid = self._space(b)
            (p.seg_reads if sp == SPACE_SEG else p.dram_reads).add(sid)
        for b in writes:
            sp, sid = self._space(b)
            (p.seg_writes if sp == SPACE_SEG else p.dram_writes).add(sid)
        self.pending.append(p)
