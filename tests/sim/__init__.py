"""Deterministic simulation and property suite for the engine (see docs/architecture/testing.md).

``python -m tests.sim --seed S --steps N -v`` replays one run; ``--soak`` runs many.
"""
