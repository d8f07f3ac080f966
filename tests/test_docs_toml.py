"""Every server configuration shown in the how-to guides is valid.

The ```toml blocks of the guides below (and the files they include with ``--8<--``) go through
the server's own configuration loader, as ``cronoq serve --check`` would: the environment
variables they name are set, and the TLS files they name exist (in a temporary directory).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cronoq.server.config import loads_config

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["production", "postgresql", "tls-and-tokens", "grpc-web"]
BLOCK = re.compile(r"^```toml\n(.*?)^```", re.S | re.M)
INCLUDE = re.compile(r'^--8<-- "([^"]+)"$', re.M)


def blocks() -> list[tuple[str, str]]:
    out = []
    for page in PAGES:
        text = (ROOT / "docs" / "how-to" / f"{page}.md").read_text()
        for i, body in enumerate(BLOCK.findall(text)):
            body = INCLUDE.sub(lambda m: (ROOT / m.group(1)).read_text(), body)
            out.append((f"{page}[{i}]", body))
    return out


def test_the_guides_show_configurations() -> None:
    assert {name.split("[")[0] for name, _ in blocks()} == set(PAGES)


@pytest.mark.parametrize(("name", "text"), blocks(), ids=[n for n, _ in blocks()])
def test_configuration_block_is_valid(
    name: str, text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    text = text.replace("/etc/cronoq/tls/", "")  # the deploy example's mount point
    for f in re.findall(r'^(?:cert|key|client_ca) = "([^"]+)"', text, re.M):
        (tmp_path / f).write_text("PEM")
    env = {v: f"{v.lower()}-0123456789abcdef" for v in re.findall(r'^token_env = "(\w+)"', text, re.M)}
    env["DATABASE_URL"] = "postgresql://cronoq:pw@db.internal:5432/cronoq"
    cfg = loads_config(text, env=env, source=name)
    assert cfg.pools, name
