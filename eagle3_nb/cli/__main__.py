"""`python -m eagle3_nb.cli`: the same as `eagle3-nb`."""

import sys

from eagle3_nb.cli import main

sys.exit(main())
