"""``python -m shuffler``: the command line. A Ctrl-C while the command line is being
found (on an editable install a walk through pathlib) is a quiet exit 130; from its
first lines on, :mod:`shuffler_cli.start` keeps start-up quiet itself."""

try:
    from shuffler_cli.start import main
except KeyboardInterrupt:
    raise SystemExit(130) from None

main()
