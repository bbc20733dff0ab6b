"""The leaderboard: a server with a database and a web page, the upload client and the GPU worker.

Modules: ``db`` (schema, migrations, queries), ``auth`` (tokens), ``seeds`` (per-job keyed seeds),
``verify`` (checking a report and recomputing its score), ``publish`` (the public view of a run),
``limits`` (body sizes, rates, security headers), ``server`` (the HTTP API), ``pages`` (the HTML
pages, Jinja2 templates under ``templates/``), ``client`` (HTTP calls for ``upload`` and ``worker``),
``jail`` (running the evaluator out of the worker's reach), ``worker`` (the verification loop),
``cli`` (click commands). Only ``server``, ``pages`` and ``db`` import fastapi / uvicorn / sqlalchemy
/ jinja2; the client and the worker need nothing beyond the standard library and the evaluator.
See docs/leaderboard-security.md for the attacks these defend against.
"""
