"""BrokerSync: cross-region disaster recovery for Amazon MQ for ActiveMQ.

The library is what the Lambda layer ships. It never imports the local harness
(``brokersync_local``): the local world wires these modules to real local brokers and
to moto, it does not fork their logic.
"""

from __future__ import annotations

__version__ = "0.1.0"
