"""The I/O layer: talking to model servers (``backends``) and running tools."""
