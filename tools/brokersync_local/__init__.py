"""The local world: real ActiveMQ brokers on loopback and moto as AWS, for development and tests.

Nothing in ``brokersync`` (the library the Lambda layer ships) imports this package. The
stand-ins for what moto lacks live here, each in its own module named after what it
stands in for, and are listed in docs/design/local-world.md.
"""
