"""``python -m ragmeter.apps.cli`` (and the old ``python -m ragmeter.cli``): the ``ragmeter`` command."""

if __name__ == "__main__":  # a spawned worker re-imports the main module: it must not run the command
    from ragmeter.apps.cli import main

    main()
