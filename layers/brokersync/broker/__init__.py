"""Talking to ActiveMQ brokers over STOMP: connections, statistics, and nothing domain-specific."""
