"""The leaderboard: a server with a database and a web page, the upload client and the GPU worker.

Modules: ``db`` (schema, migrations, queries), ``auth`` (tokens), ``verify`` (checking a report and
recomputing its score), ``server`` (the HTTP API), ``pages`` (the HTML pages), ``client`` (HTTP
calls for ``upload`` and ``worker``), ``worker`` (the verification loop), ``cli`` (click commands).
Only ``server`` and ``db`` import fastapi / uvicorn / sqlalchemy; the client and the worker need
nothing beyond the standard library and the evaluator.
"""
