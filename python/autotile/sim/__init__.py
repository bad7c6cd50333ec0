"""Execution simulator: hardware profiles (``profiles/*.json``), a cost table of sub-operator
times (roofline or calibrated measurements) and an event-driven simulation of an ExecGraph's
training step with per-device streams and link contention."""
from .cost_table import Calibration, CostTable, flops
from .hardware import Hardware, available_profiles, load_profile, profile_from_dict
from .simulator import SimResult, Simulator, simulate

__all__ = ["Calibration", "CostTable", "Hardware", "SimResult", "Simulator", "available_profiles", "flops",
           "load_profile", "profile_from_dict", "simulate"]
