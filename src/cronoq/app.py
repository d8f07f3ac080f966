"""``cronoq.app``: where :class:`~cronoq.App` was first defined, kept so that ``from cronoq.app
import App`` keeps working.  The registry itself is :mod:`cronoq.tasks.app`, beside the layer it
is built on."""

from cronoq.tasks.app import App

__all__ = ["App"]
