"""``python3 -m meshcomm.launch``: the meshrun launcher."""

import sys

from . import main

sys.exit(main())
