"""MkDocs hook: the reference pages generated from the code at build time.

A page asks for a generated block with an HTML comment on a line of its own,
``<!-- cronoq:NAME -->``; :data:`BLOCKS` maps each name to the function that renders it
(modules ``ref_*.py`` beside this file). Nothing is committed that the code could contradict:
the HTTP reference comes from the server's OpenAPI document (also published as
``reference/openapi.json``), the configuration keys from the config parser, the metrics from
what a real scheduler exports, the exit codes from the CLI. Any problem a generator finds
(an undescribed config key, an unknown block) is logged as a warning, which fails
``mkdocs build --strict``.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ref_bench
import ref_config
import ref_errors
import ref_grpc
import ref_http
import ref_lifecycle
import ref_metrics

log = logging.getLogger("mkdocs.hooks.cronoq_docs")

_BLOCK_RE = re.compile(r"^<!-- cronoq:(?P<name>[a-z0-9-]+) -->$", re.MULTILINE)


def _exit_codes() -> str:
    from cronoq.cli import EXIT_CODES

    rows = ["| exit code | meaning |", "|---|---|"]
    rows += [f"| {code} | {text} |" for code, text in EXIT_CODES.items()]
    return "\n".join(rows)


BLOCKS: dict[str, Callable[[], str]] = {
    "http-api": ref_http.render,
    "config-keys": ref_config.render,
    "serve-options": ref_config.serve_options,
    "metrics": ref_metrics.render,
    "cli-exit-codes": _exit_codes,
    "error-classes": ref_errors.classes,
    "submit-codes": ref_errors.submit_codes,
    "status-map": ref_errors.status_map,
    "transitions": ref_lifecycle.render,
    "grpc-services": ref_grpc.services,
    "worker-messages": ref_grpc.worker_messages,
    **ref_bench.blocks(),
}


#: Blocks whose generator also knows what the page is missing (an undescribed key, code, event).
CHECKS: dict[str, Callable[[], list[str]]] = {
    "config-keys": ref_config.problems,
    "submit-codes": ref_errors.problems,
    "transitions": ref_lifecycle.problems,
}


def expand(markdown: str, where: str = "") -> str:
    """Replace every ``<!-- cronoq:NAME -->`` line by its generated Markdown."""

    def one(m: re.Match[str]) -> str:
        fn = BLOCKS.get(m["name"])
        if fn is None:
            log.warning("%s: unknown generated block %r (known: %s)", where, m["name"], ", ".join(BLOCKS))
            return m[0]
        return fn()

    return _BLOCK_RE.sub(one, markdown)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    out = expand(markdown, page.file.src_uri)
    for block, check in CHECKS.items():
        if f"<!-- cronoq:{block} -->" in markdown:
            for problem in check():
                log.warning("%s: %s", page.file.src_uri, problem)
    return out


#: Sphinx roles left in docstrings (``:class:`Scheduler```) render as ``:class:`` + code in
#: Markdown; the role prefix is dropped and the code kept.
_ROLE_RE = re.compile(r":(?:class|func|meth|data|attr|mod|exc|obj):(?=<code>)")


#: click >= 8.2 leaves its "no default" sentinel in option defaults; mkdocs-click shows it as is.
_UNSET = "<td><code>Sentinel.UNSET</code></td>"


def on_page_content(html: str, page: Any, **kwargs: Any) -> str:
    return _ROLE_RE.sub("", html).replace(_UNSET, "<td>-</td>")


def on_files(files: Any, config: Any, **kwargs: Any) -> Any:
    """Publish the OpenAPI document and the proto file beside their reference pages."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, "reference/openapi.json", content=ref_http.openapi_json()))
    files.append(File.generated(config, "reference/cronoq.proto", content=ref_grpc.proto_text()))
    return files
