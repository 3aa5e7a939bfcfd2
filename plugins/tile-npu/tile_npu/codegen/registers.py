"""Register allocation: scalar registers (r8..r254) and vector slots (scratchpad segments)."""

from __future__ import annotations

from ..isa import NO_REG, Segment
from .host import NpuHost

FIRST_FREE_REG = 8
ZERO = 0  # r0 holds 0 in kernel code


def all_free_registers() -> list:
    """The free list of a fresh program: every allocatable register, lowest popped first."""
    return list(range(254, FIRST_FREE_REG - 1, -1))


class RegisterAllocation(NpuHost):
    """Hands out and takes back scalar registers and vector slots; bound variables stay reserved."""

    def reg(self) -> int:
        """A free scalar register; a clear error when all 247 are taken."""
        if not self.free_regs:
            raise self.error("the expression needs more than 247 scalar registers on npu; split it")
        return self.free_regs.pop()

    def release(self, *regs):
        """Return registers to the free list (r0..r7, NO_REG and bound variables are kept)."""
        for r in regs:
            if (
                r is not None
                and r >= FIRST_FREE_REG
                and r != NO_REG
                and r not in self.free_regs
                and r not in self.env.values()
            ):
                self.free_regs.append(r)

    def li(self, value: int) -> int:
        """A fresh register holding the integer `value`."""
        r = self.reg()
        self.emit("li", r=(r,), imm=int(value))
        return r

    def restore_env(self, saved):
        """Leave a scope: forget variables bound inside it and free their registers."""
        dropped = [r for k, r in self.env.items() if k not in saved or saved[k] != r]
        self.env = dict(saved)
        self.release(*dropped)

    def slot(self) -> int:
        """A free vector slot (a segment of `vector_chunk` 32-bit lanes), reused when possible."""
        if self.slot_free:
            return self.slot_free.pop()
        sid = len(self.prog.segments)
        self.prog.segments.append(Segment(f"vslot{len(self.slots)}", "none", (self.cfg.vector_chunk * 4,), 0))
        self.slots.append(sid)
        return sid

    def free_slot(self, *sids):
        """Return vector slots to the free list (None and non-slots are ignored)."""
        for s in sids:
            if s is not None and s in self.slots and s not in self.slot_free:
                self.slot_free.append(s)
