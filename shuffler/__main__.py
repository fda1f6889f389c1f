"""``python -m shuffler``: the command line."""

from shuffler_cli.main import main

main()
