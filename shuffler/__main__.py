"""``python -m shuffler``: the command line."""

from shuffler_cli.start import main

main()
