"""``python -m meshcomm.torch.build_native``: compiles the torch backend's
native part now, for the torch in this environment (in an image's build
step, say), or again after a failed attempt, showing why (native_build.py).
Its own module: ``meshcomm.torch`` imports native_build itself."""

import sys

from .native_build import main

sys.exit(main())
