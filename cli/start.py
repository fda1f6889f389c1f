"""The console script's entry: its very first lines make a signal during start-up
(while click and the commands import) a quiet exit instead of an import's traceback;
then the command line runs (:func:`shuffler_cli.main.main`)."""

try:  # a Ctrl-C inside these two lines themselves is quiet too
    from shuffler.control.signals import quiet_until_ready

    quiet_until_ready()
except KeyboardInterrupt:
    import os

    os.write(2, b"shuffler: interrupted while starting; nothing was started\n")
    os._exit(130)


def main() -> None:
    from .main import main as run

    run()
