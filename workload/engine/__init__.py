"""The engine: runs a scenario's sweep points — the coordinator, the fleet of node processes,
the worker loops, recording, faults, backlog phases, telemetry and the capacity search — and,
under ``aws/``, the same on AWS machines."""
