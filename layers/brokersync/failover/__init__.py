"""Failover, switchover and failback: the steps the state machines run, one idempotent action each."""
