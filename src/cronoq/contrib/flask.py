"""The Flask extension: binds a :class:`cronoq.App` for a Flask app and runs its tasks inside
the Flask app's ``app_context()`` on the worker (docs/getting-started/flask.md).

Theory of operation
-------------------
``Cronoq(flask_app, tasks_app)`` (or ``Cronoq(tasks_app=...)`` then ``init_app(flask_app)``)
reads ``CRONOQ_SERVER``, ``CRONOQ_TOKEN`` and ``CRONOQ_TLS`` from ``flask_app.config`` (or its
arguments), builds one :class:`cronoq.client.BlockingClient` for the process and binds the
cronoq app to it, so views call ``t.submit_sync(...)`` / ``t.enqueue_sync(...)`` (or
``ext.client.submit(...)``) from any request thread. It registers itself as
``flask_app.extensions["cronoq"]``.

It also adds a call hook to the cronoq app: every task function runs inside
``flask_app.app_context()`` — pushed in the thread that runs a plain function, around the
await of an ``async def`` —, so ``current_app``, ``g`` and extensions bound to the app
(Flask-SQLAlchemy's session, for one) work in tasks run by ``cronoq worker MODULE:APP`` when
MODULE builds the Flask app. A cronoq app has one such hook: ``init_app`` again (an application
factory called once per test, say) moves it to the new Flask app, and closes the extension's
previous client.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cronoq.client import BlockingClient
    from cronoq.tasks.app import App

__all__ = ["Cronoq"]


class _AppContextHook:
    """The call hook: ``flask_app.app_context()`` around every task function."""

    def __init__(self, flask_app: Any) -> None:
        self.flask_app = flask_app

    def sync_context(self) -> contextlib.AbstractContextManager[Any]:
        cm: contextlib.AbstractContextManager[Any] = self.flask_app.app_context()
        return cm

    @contextlib.asynccontextmanager
    async def async_context(self) -> AsyncIterator[None]:
        with self.flask_app.app_context():
            yield


class Cronoq:
    """The Flask extension (see the module docstring)."""

    def __init__(
        self,
        flask_app: Any = None,
        tasks_app: App | None = None,
        *,
        server: str | Sequence[str] | None = None,
        token: str | None = None,
        tls: bool | None = None,
    ) -> None:
        self.tasks_app = tasks_app
        self._server = server
        self._token = token
        self._tls = tls
        self.client: BlockingClient | None = None
        if flask_app is not None:
            self.init_app(flask_app)

    def init_app(self, flask_app: Any) -> None:
        """Configure for ``flask_app`` (the application-factory pattern)."""
        from cronoq.client import BlockingClient
        from cronoq.tasks.app import App

        if not isinstance(self.tasks_app, App):
            raise ValueError(
                f"Cronoq needs the cronoq.App to bind: Cronoq(app, tasks_app) (got {self.tasks_app!r})"
            )
        config = flask_app.config
        server = self._server or config.get("CRONOQ_SERVER")
        if not server:
            raise ValueError(
                "Cronoq needs the server address: set CRONOQ_SERVER = 'HOST:PORT' in the Flask config"
            )
        token = self._token if self._token is not None else config.get("CRONOQ_TOKEN")
        tls = self._tls if self._tls is not None else config.get("CRONOQ_TLS", False)
        if not isinstance(tls, bool):  # (a string "false" from the environment is truthy)
            raise ValueError(f"CRONOQ_TLS must be True or False (got {tls!r})")
        if token is not None and not isinstance(token, str):
            raise ValueError(f"CRONOQ_TOKEN must be a string (got {type(token).__name__})")
        previous, self.client = self.client, BlockingClient(server, token=token, tls=tls)
        self.tasks_app.bind(self.client)
        if previous is not None:
            previous.close()
        hook = next((h for h in self.tasks_app.call_hooks if isinstance(h, _AppContextHook)), None)
        if hook is None:
            self.tasks_app.add_call_hook(_AppContextHook(flask_app))
        else:  # the cronoq app runs its tasks in the latest Flask app's context, and only there
            hook.flask_app = flask_app
        flask_app.extensions["cronoq"] = self

    def close(self) -> None:
        """Unbind the cronoq app and close the client."""
        if self.client is not None:
            assert self.tasks_app is not None
            self.tasks_app.bind(None)
            self.client.close()
            self.client = None
