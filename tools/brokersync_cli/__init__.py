"""The ``brokersync`` command: a thin shell over the library and the local harness."""
