"""Puts the documentation generators (``docs/hooks``, not a package) on ``sys.path`` for the
tests of this directory, which import them by module name as the MkDocs hook does."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
HOOKS = DOCS / "hooks"

if str(HOOKS) not in sys.path:
    sys.path.insert(0, str(HOOKS))
