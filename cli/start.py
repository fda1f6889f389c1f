"""The console script's entry: its very first lines make a signal during start-up
(while click and the commands import) a quiet exit instead of an import's traceback;
then the command line runs (:func:`shuffler_cli.main.main`)."""

from shuffler.control.signals import quiet_until_ready

quiet_until_ready()


def main() -> None:
    from .main import main as run

    run()
