"""Leaves every layer may use: the command line's words (argv.py), output as rich or the JSON envelope
(output.py), big JSON streamed (jsonstream.py), timestamps (timeutil.py), the one YAML loader (yamlsafe.py).
Nothing here imports the rest of roadmap_cli beyond errors and paths."""
