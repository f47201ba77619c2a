"""Purge: removing from DR queues exactly the messages the ledger says were consumed on the primary."""
