"""research-dispatch: one researcher per (topic, model), cited reports with route provenance,
a cross-family synthesis, and one pull request for human review."""

# The one place the version lives: pyproject.toml reads it ([tool.setuptools.dynamic]), `--version`
# prints it, and `init` pins the generated workflows to the release tag `v<version>`.
__version__ = "0.1.0"
