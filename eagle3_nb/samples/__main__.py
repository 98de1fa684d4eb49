"""`python -m eagle3_nb.samples`: rebuild data_samples/ (see main --help)."""

from eagle3_nb.samples import main

main()
