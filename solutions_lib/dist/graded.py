"""Run a grading check on every rank and report a failed check as a grading failure.

A test cell that grades distributed code runs the checks *inside* the ranks (that is where
the student's tensors and hooks live). `launch_graded` turns a `GradingError` raised on a rank
(a wrong value, a call into a forbidden library) into a `GradingError` in the notebook, with
the rank's own message and no traceback noise; any other failure stays a `LaunchError`.
"""
from __future__ import annotations

from typing import Any, Callable

from ..grading import DelegationError, GradingError, _publish_record
from .launch import launch

__all__ = ["launch_graded"]


class _Failed:
    def __init__(self, kind: str, message: str):
        self.kind, self.message = kind, message


def _guarded(rank, world_size, fn, args, kwargs):
    try:
        return fn(rank, world_size, *args, **kwargs)
    except DelegationError as e:
        return _Failed("delegation", str(e))
    except GradingError as e:
        return _Failed("grading", str(e))


def launch_graded(fn: Callable[..., Any], world_size: int = 2, *, args: tuple = (),
                  kwargs: dict | None = None, **launch_kwargs) -> list[Any]:
    """Like `launch`; a GradingError raised on any rank is raised here as the same kind of error.

    The first failing rank (lowest rank) is reported: "rank 1: <message>".
    """
    out = launch(_guarded, world_size, args=(fn, args, kwargs or {}), **launch_kwargs)
    for rank, r in enumerate(out):
        if isinstance(r, _Failed):
            cls = DelegationError if r.kind == "delegation" else GradingError
            raise cls(f"rank {rank}: {r.message}")
    # the checks ran in the ranks, whose records cannot reach the notebook: one for them all
    _publish_record("ranks", getattr(fn, "__name__", "checks"), world_size=int(world_size))
    return out
