"""``python -m rote``: the book tool's command line (:mod:`rote.build.cli`); an entry point, which the
library never imports."""
import sys

from .build.cli import main

sys.exit(main())
