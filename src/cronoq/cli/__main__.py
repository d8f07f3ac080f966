"""``python -m cronoq.cli``: the same command line as the ``cronoq`` console script.

Nothing but the call of :func:`cronoq.cli.main`; the commands live in the package's modules.
"""

from cronoq.cli import main

main()
