"""An ASGI lifespan that connects a :class:`cronoq.client.Client` for a web app's lifetime and
binds :class:`cronoq.App` s to it (docs/getting-started/fastapi.md).

Theory of operation
-------------------
:func:`cronoq_lifespan` returns what FastAPI's and Starlette's ``lifespan=`` take (Litestar's
``lifespan=[...]`` too): a function of the web app returning an async context manager. On
startup it builds the client (no I/O yet: the channel opens lazily, on the web app's loop),
binds every given app to it (their ``t.submit(...)`` go to the server; ``t.submit_sync(...)``
from a ``def`` endpoint's worker thread reach the same loop), then enters the web app's own
lifespan (``then=``) if any. It yields the lifespan state: ``{"cronoq": client}`` merged with
the mapping the app's own lifespan yielded, so endpoints find the client as
``request.state.cronoq``. On shutdown it leaves them in reverse order, unbinds the apps and
closes the client.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cronoq.tasks.app import App

__all__ = ["cronoq_lifespan"]

Lifespan = Callable[[Any], contextlib.AbstractAsyncContextManager[Any]]


def cronoq_lifespan(
    apps: App | Sequence[App] = (),
    *,
    server: str | Sequence[str],
    token: str | None = None,
    tls: bool = False,
    then: Lifespan | None = None,
    state_key: str = "cronoq",
    **client_options: Any,
) -> Lifespan:
    """The lifespan of a web app that talks to a cronoq server (see the module docstring):
    ``FastAPI(lifespan=cronoq_lifespan(tasks_app, server="127.0.0.1:7070"))``.

    ``then`` is the web app's own lifespan (entered inside this one); ``client_options`` are
    the :class:`cronoq.client.Client`'s (``credentials``, ``options``, ...)."""
    from cronoq.tasks.app import App

    bound = [apps] if isinstance(apps, App) else list(apps)
    for a in bound:
        if not isinstance(a, App):
            raise ValueError(f"cronoq_lifespan binds cronoq.App objects (got {a!r})")
    if not server:
        raise ValueError("cronoq_lifespan needs the server address: server='HOST:PORT'")
    if not isinstance(state_key, str) or not state_key:
        raise ValueError(f"state_key must be a non-empty string (got {state_key!r})")

    @contextlib.asynccontextmanager
    async def lifespan(web_app: Any) -> AsyncIterator[dict[str, Any]]:
        from cronoq.client import Client

        async with Client(server, token=token, tls=tls, **client_options) as client:
            for a in bound:
                a.bind(client)
            try:
                state: dict[str, Any] = {state_key: client}
                if then is None:
                    yield state
                    return
                async with then(web_app) as own:
                    if own is not None and not isinstance(own, Mapping):
                        raise TypeError(f"the app's own lifespan must yield a mapping or None (got {own!r})")
                    yield {**state, **(own or {})}
            finally:
                for a in bound:
                    a.bind(None)

    return lifespan
