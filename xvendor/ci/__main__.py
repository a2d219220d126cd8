"""``python -m xvendor.ci matrix|versions|run ...``: the ``xvendor ci`` commands."""

import sys

from .cli import main

sys.exit(main())
