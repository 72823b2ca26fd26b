"""The shapes every layer shares: the scenario and its sweep points, the run layout and
record, the raw tables and the fault timelines, and the rules that judge a point. The
engine (the rest of :mod:`workload`) writes them, the analysis reads them; nothing here
runs a broker or a worker.

Imports nothing of its own: the fault and telemetry agents of a broker machine import
:mod:`workload.model.layout` with the system's Python, without the project's dependencies.
"""
