"""Runs the documentation's code blocks as tests (sybil).

Every fenced ```python block in a page under docs/ is executed, in page order, in one namespace
per page, so a page reads as one program. A block that must not run (it needs a server, or shows
a fragment) is preceded by ``<!-- skip: next -->``. Shell, TOML and console blocks are never run.
Tutorial programs live under examples/ and are run whole by tests/examples/.
"""

import os

# grpc's fork handlers restart its poller thread in a forked child, and subprocess.Popen has closed
# that poller's fd before exec: the child aborts ("epoll_wait error: Bad file descriptor",
# grpc/grpc#43055) before it becomes the cronoq process a test starts. The tests fork while gRPC
# is live in this process, so its fork support is off (read when grpc is first imported).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser

pytest_collect_file = Sybil(
    parsers=[PythonCodeBlockParser(), SkipParser()],
    patterns=["*.md"],
    path="./docs",
).pytest()
