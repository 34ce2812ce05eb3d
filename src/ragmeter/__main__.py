"""``python -m ragmeter``: the ``ragmeter`` command (:func:`ragmeter.apps.cli.main`)."""

if __name__ == "__main__":  # a spawned worker re-imports the main module: it must not run the command
    from ragmeter.apps.cli import main

    main()
