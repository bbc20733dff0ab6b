"""Evaluator for the batched QR kernel contest: specs, isolated runs, checks, timing, reports.

Run it with ``python -m eval --help``; the module layout is described in docs/architecture.md.
"""

__version__ = "0.1.0"
