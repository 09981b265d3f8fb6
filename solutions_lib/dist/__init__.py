"""The distributed lab kit: a launcher for gloo/NCCL runs and a collective counter."""
from .counting import CommCounter
from .graded import launch_graded
from .launch import LaunchError, default_backend, launch

__all__ = ["CommCounter", "LaunchError", "default_backend", "launch", "launch_graded"]
