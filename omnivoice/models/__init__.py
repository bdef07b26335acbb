"""Model families, one subpackage each (docs/architecture.md): the family-specific model classes,
their request pipelines and numpy steps. Shared code reaches them through ``omnivoice.load``."""
