"""Deterministic simulation and property suite for the engine (see docs/testing.md).

``python -m tests.sim --seed S --steps N -v`` replays one run; ``--soak`` runs many.
"""
