"""A Flask site with the cronoq extension (its tasks are served by
``cronoq worker flask_site:tasks --pool flask``; the server comes from ``$CRONOQ_SERVER``)."""

from __future__ import annotations

import os

import flask

from cronoq import App
from cronoq.contrib.flask import Cronoq

tasks = App("flask-site")


@tasks.task(name="flask.config_value", pool="flask")
def config_value(key: str) -> str:  # a plain function: runs in a worker thread
    return str(flask.current_app.config[key])


@tasks.task(name="flask.app_name", pool="flask")
async def app_name() -> str:
    return flask.current_app.name


site = flask.Flask("flask_site")
site.config.update(CRONOQ_SERVER=os.environ["CRONOQ_SERVER"], GREETING="bonjour")
ext = Cronoq(site, tasks)


@site.post("/config/<key>")
def read_config(key: str) -> dict[str, object]:
    handle = config_value.submit_sync(key)
    return {"id": handle.id, "value": handle.result(timeout=30)}
