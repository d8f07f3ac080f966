"""Integrations with web frameworks: :mod:`cronoq.contrib.asgi` (FastAPI, Starlette, Litestar),
:mod:`cronoq.contrib.flask` and :mod:`cronoq.contrib.django` (the ``django`` extra).

Nothing here is imported by ``import cronoq``; each module imports its framework only when
used.
"""
