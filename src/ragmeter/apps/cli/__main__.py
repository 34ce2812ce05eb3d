"""``python -m ragmeter.apps.cli``: the ``ragmeter`` command (its old path runs it too, with a FutureWarning)."""

if __name__ == "__main__":  # a spawned worker re-imports the main module: it must not run the command
    from ragmeter.apps.cli import main

    main()
