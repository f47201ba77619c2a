"""What Amazon MQ accepts in an ActiveMQ broker configuration, as data.

Sources (Amazon MQ Developer Guide):
* Elements permitted in Amazon MQ configurations:
  https://docs.aws.amazon.com/amazon-mq/latest/developer-guide/permitted-elements.html
* Elements and their attributes permitted:
  https://docs.aws.amazon.com/amazon-mq/latest/developer-guide/permitted-attributes.html
* Child collection elements permitted:
  https://docs.aws.amazon.com/amazon-mq/latest/developer-guide/permitted-collections.html
* Child element attributes (networkConnector, kahaDB, systemUsage):
  https://docs.aws.amazon.com/amazon-mq/latest/developer-guide/child-element-details.html

Amazon MQ does not fail on a disallowed element or attribute: it silently removes it
and reports a sanitization warning on the configuration revision. A silently removed
``advisoryForConsumed`` would mean no capture at all, so we check before we ever upload.

``networkConnector``: the child-element page documents ``conduitSubscriptions``,
``duplex``, ``name``, ``uri`` and ``userName``. ``staticBridge`` is in
:data:`UNDOCUMENTED_BUT_RENDERED`: we render it, and we also render a
``dynamicallyIncludedDestinations`` list naming one queue that never exists, so that if
Amazon MQ sanitizes ``staticBridge`` away the bridge still forwards nothing but the
statically included queues. The apply step reports any sanitization warning.
"""

from __future__ import annotations

from lxml import etree

from brokersync.exceptions import NotAllowedByAmazonMQError

CORE_NS = "http://activemq.apache.org/schema/core"

_DESTINATION = frozenset({"physicalName"})

#: element -> permitted attributes
ATTRIBUTES: dict[str, frozenset[str]] = {
    "broker": frozenset(
        {
            "advisorySupport",
            "allowTempAutoCreationOnSend",
            "cacheTempDestinations",
            "consumerSystemUsagePortion",
            "dedicatedTaskRunner",
            "deleteAllMessagesOnStartup",
            "enableMessageExpirationOnActiveDurableSubs",
            "keepDurableSubsActive",
            "maxPurgedDestinationsPerSweep",
            "maxSchedulerRepeatAllowed",
            "monitorConnectionSplits",
            "networkConnectorStartAsync",
            "offlineDurableSubscriberTaskSchedule",
            "offlineDurableSubscriberTimeout",
            "persistenceThreadPriority",
            "persistent",
            "populateJMSXUserID",
            "producerSystemUsagePortion",
            "rejectDurableConsumers",
            "rollbackOnlyOnAsyncException",
            "schedulePeriodForDestinationPurge",
            "schedulerSupport",
            "splitSystemUsageForProducersConsumers",
            "taskRunnerPriority",
            "timeBeforePurgeTempDestinations",
            "useAuthenticatedPrincipalForJMSXUserID",
            "useMirroredQueues",
            "useTempMirroredQueues",
            "useVirtualDestSubs",
            "useVirtualDestSubsOnCreation",
            "useVirtualTopics",
        }
    ),
    "queue": _DESTINATION,
    "topic": _DESTINATION,
    "tempQueue": _DESTINATION,
    "tempTopic": _DESTINATION,
    "compositeQueue": frozenset({"name", "forwardOnly", "concurrentSend", "copyMessage", "sendWhenNotMatched"}),
    "compositeTopic": frozenset({"name", "forwardOnly", "concurrentSend", "copyMessage", "sendWhenNotMatched"}),
    "virtualTopic": frozenset({"name", "prefix", "selectorAware", "local", "concurrentSend", "transactedSend"}),
    "filteredDestination": frozenset({"selector", "queue", "topic"}),
    "mirroredQueue": frozenset({"copyMessage", "postfix", "prefix"}),
    "policyEntry": frozenset(
        {
            "advisoryForConsumed",
            "advisoryForDelivery",
            "advisoryForDiscardingMessages",
            "advisoryForFastProducers",
            "advisoryForSlowConsumers",
            "advisoryWhenFull",
            "allConsumersExclusiveByDefault",
            "alwaysRetroactive",
            "blockedProducerWarningInterval",
            "consumersBeforeDispatchStarts",
            "cursorMemoryHighWaterMark",
            "doOptimzeMessageStorage",
            "durableTopicPrefetch",
            "enableAudit",
            "expireMessagesPeriod",
            "gcInactiveDestinations",
            "gcWithNetworkConsumers",
            "inactiveTimeoutBeforeGC",
            "inactiveTimoutBeforeGC",
            "includeBodyForAdvisory",
            "lazyDispatch",
            "maxAuditDepth",
            "maxBrowsePageSize",
            "maxDestinations",
            "maxExpirePageSize",
            "maxPageSize",
            "maxProducersToAudit",
            "maxQueueAuditDepth",
            "memoryLimit",
            "messageGroupMapFactoryType",
            "minimumMessageSize",
            "optimizedDispatch",
            "optimizeMessageStoreInFlightLimit",
            "persistJMSRedelivered",
            "prioritizedMessages",
            "producerFlowControl",
            "queue",
            "queueBrowserPrefetch",
            "queuePrefetch",
            "reduceMemoryFootprint",
            "sendAdvisoryIfNoConsumers",
            "storeUsageHighWaterMark",
            "strictOrderDispatch",
            "tempQueue",
            "tempTopic",
            "timeBeforeDispatchStarts",
            "topic",
            "topicPrefetch",
            "useCache",
            "useConsumerPriority",
            "usePrefetchExtension",
        }
    ),
    "networkConnector": frozenset({"conduitSubscriptions", "duplex", "name", "uri", "userName", "staticBridge"}),
    "kahaDB": frozenset(
        {
            "concurrentStoreAndDispatchQueues",
            "journalDiskSyncInterval",
            "journalDiskSyncStrategy",
            "preallocationStrategy",
        }
    ),
    "systemUsage": frozenset({"sendFailIfNoSpace", "sendFailIfNoSpaceAfterTimeout"}),
    "memoryUsage": frozenset({"percentOfJvmHeap"}),
    "authorizationEntry": frozenset({"admin", "queue", "read", "tempQueue", "tempTopic", "topic", "write"}),
    "tempDestinationAuthorizationEntry": frozenset({"admin", "read", "write"}),
    "redeliveryPlugin": frozenset({"fallbackToDeadLetter", "sendToDlqIfMaxRetriesExceeded"}),
    "redeliveryPolicy": frozenset(
        {
            "backOffMultiplier",
            "initialRedeliveryDelay",
            "maximumRedeliveries",
            "maximumRedeliveryDelay",
            "queue",
            "redeliveryDelay",
            "tempQueue",
            "tempTopic",
            "topic",
            "useExponentialBackOff",
        }
    ),
    "timeStampingBrokerPlugin": frozenset(
        {"futureOnly", "ttlCeiling", "zeroExpirationOverride", "processNetworkMessages"}
    ),
    "forcePersistencyModeBrokerPlugin": frozenset({"persistenceFlag"}),
    "discardingDLQBrokerPlugin": frozenset(
        {"dropAll", "dropOnly", "dropTemporaryQueues", "dropTemporaryTopics", "reportInterval"}
    ),
    "individualDeadLetterStrategy": frozenset(
        {
            "destinationPerDurableSubscriber",
            "enableAudit",
            "expiration",
            "processExpired",
            "processNonPersistent",
            "queuePrefix",
            "queueSuffix",
            "topicPrefix",
            "topicSuffix",
            "useQueueForQueueMessages",
            "useQueueForTopicMessages",
        }
    ),
    "sharedDeadLetterStrategy": frozenset({"enableAudit", "expiration", "processExpired", "processNonPersistent"}),
    "abortSlowAckConsumerStrategy": frozenset(
        {
            "abortConnection",
            "checkPeriod",
            "ignoreIdleConsumers",
            "ignoreNetworkConsumers",
            "maxSlowCount",
            "maxSlowDuration",
            "maxTimeSinceLastAck",
            "name",
        }
    ),
    "abortSlowConsumerStrategy": frozenset(
        {"abortConnection", "checkPeriod", "ignoreNetworkConsumers", "maxSlowCount", "maxSlowDuration", "name"}
    ),
    "constantPendingMessageLimitStrategy": frozenset({"limit"}),
    "prefetchRatePendingMessageLimitStrategy": frozenset({"multiplier"}),
    "oldestMessageEvictionStrategy": frozenset({"evictExpiredMessagesHighWatermark"}),
    "oldestMessageWithLowestPriorityEvictionStrategy": frozenset({"evictExpiredMessagesHighWatermark"}),
    "uniquePropertyMessageEvictionStrategy": frozenset({"evictExpiredMessagesHighWatermark", "propertyName"}),
    "cachedMessageGroupMapFactory": frozenset({"cacheSize"}),
    "messageGroupHashBucketFactory": frozenset({"bucketCount", "cacheSize"}),
    "fixedCountSubscriptionRecoveryPolicy": frozenset({"maximumSize"}),
    "fixedSizedSubscriptionRecoveryPolicy": frozenset({"maximumSize", "useSharedBuffer"}),
    "queryBasedSubscriptionRecoveryPolicy": frozenset({"query"}),
    "timedSubscriptionRecoveryPolicy": frozenset({"recoverDuration"}),
    "storeDurableSubscriberCursor": frozenset({"immediatePriorityDispatch", "useCache"}),
    "discarding": frozenset({"deadLetterQueue", "enableAudit", "expiration", "processExpired", "processNonPersistent"}),
}

# The wrappers inside a policyEntry, each holding one strategy, cursor or policy.
_POLICY_WRAPPERS = frozenset(
    {
        "deadLetterStrategy",
        "dispatchPolicy",
        "messageEvictionStrategy",
        "messageGroupMapFactory",
        "pendingDurableSubscriberPolicy",
        "pendingMessageLimitStrategy",
        "pendingQueuePolicy",
        "pendingSubscriberPolicy",
        "slowConsumerStrategy",
        "subscriptionRecoveryPolicy",
    }
)
# Policy-entry strategies and cursors: any of these may sit inside a wrapper (not policed further).
_POLICY_PARTS = _POLICY_WRAPPERS | frozenset(
    {
        "individualDeadLetterStrategy",
        "sharedDeadLetterStrategy",
        "discarding",
        "abortSlowAckConsumerStrategy",
        "abortSlowConsumerStrategy",
        "constantPendingMessageLimitStrategy",
        "prefetchRatePendingMessageLimitStrategy",
        "oldestMessageEvictionStrategy",
        "oldestMessageWithLowestPriorityEvictionStrategy",
        "uniquePropertyMessageEvictionStrategy",
        "cachedMessageGroupMapFactory",
        "messageGroupHashBucketFactory",
        "simpleMessageGroupMapFactory",
        "fixedCountSubscriptionRecoveryPolicy",
        "fixedSizedSubscriptionRecoveryPolicy",
        "lastImageSubscriptionRecoveryPolicy",
        "noSubscriptionRecoveryPolicy",
        "queryBasedSubscriptionRecoveryPolicy",
        "retainedMessageSubscriptionRecoveryPolicy",
        "timedSubscriptionRecoveryPolicy",
        "fileCursor",
        "fileDurableSubscriberCursor",
        "fileQueueCursor",
        "storeCursor",
        "storeDurableSubscriberCursor",
        "vmCursor",
        "vmDurableCursor",
        "vmQueueCursor",
        "priorityDispatchPolicy",
        "priorityNetworkDispatchPolicy",
        "roundRobinDispatchPolicy",
        "simpleDispatchPolicy",
        "strictOrderDispatchPolicy",
        "queue",
        "topic",
        "wrapped",
    }
)

_DESTINATIONS = frozenset({"queue", "topic", "tempQueue", "tempTopic"})

#: element -> permitted child elements (collections and their members)
CHILDREN: dict[str, frozenset[str]] = {
    # Amazon MQ manages transportConnectors, managementContext, sslContext and the like:
    # none of them may appear in a configuration.
    "broker": frozenset(
        {
            "destinationInterceptors",
            "destinationPolicy",
            "destinations",
            "networkConnectors",
            "persistenceAdapter",
            "plugins",
            "systemUsage",
        }
    ),
    "destinations": _DESTINATIONS,
    "destinationInterceptors": frozenset({"virtualDestinationInterceptor", "mirroredQueue"}),
    "virtualDestinationInterceptor": frozenset({"virtualDestinations"}),
    "virtualDestinations": frozenset({"compositeQueue", "compositeTopic", "virtualTopic"}),
    "compositeQueue": frozenset({"forwardTo"}),
    "compositeTopic": frozenset({"forwardTo"}),
    "forwardTo": frozenset({"queue", "topic", "filteredDestination"}),
    "destinationPolicy": frozenset({"policyMap"}),
    "policyMap": frozenset({"policyEntries", "defaultEntry"}),
    "policyEntries": frozenset({"policyEntry"}),
    "defaultEntry": frozenset({"policyEntry", "redeliveryPolicy"}),
    "policyEntry": _POLICY_PARTS,
    "networkConnectors": frozenset({"networkConnector"}),
    "networkConnector": frozenset(
        {"excludedDestinations", "staticallyIncludedDestinations", "dynamicallyIncludedDestinations"}
    ),
    "excludedDestinations": _DESTINATIONS,
    "staticallyIncludedDestinations": _DESTINATIONS,
    "dynamicallyIncludedDestinations": _DESTINATIONS,
    "persistenceAdapter": frozenset({"kahaDB"}),
    "plugins": frozenset(
        {
            "authorizationPlugin",
            "discardingDLQBrokerPlugin",
            "forcePersistencyModeBrokerPlugin",
            "redeliveryPlugin",
            "statisticsBrokerPlugin",
            "timeStampingBrokerPlugin",
        }
    ),
    "authorizationPlugin": frozenset({"map"}),
    "map": frozenset({"authorizationMap"}),
    "authorizationMap": frozenset({"authorizationEntries", "tempDestinationAuthorizationEntry"}),
    "authorizationEntries": frozenset({"authorizationEntry"}),
    # The property element wraps the bean of the same name (ActiveMQ's schema; Amazon MQ's example).
    "tempDestinationAuthorizationEntry": frozenset({"tempDestinationAuthorizationEntry"}),
    "redeliveryPlugin": frozenset({"redeliveryPolicyMap"}),
    "redeliveryPolicyMap": frozenset({"redeliveryPolicyMap", "redeliveryPolicyEntries", "defaultEntry"}),
    "redeliveryPolicyEntries": frozenset({"redeliveryPolicy"}),
    "systemUsage": frozenset({"systemUsage", "memoryUsage"}),
    "memoryUsage": frozenset({"memoryUsage"}),
}

for _wrapper in _POLICY_WRAPPERS:
    CHILDREN[_wrapper] = _POLICY_PARTS
CHILDREN["sharedDeadLetterStrategy"] = frozenset({"deadLetterQueue"})
CHILDREN["deadLetterQueue"] = _DESTINATIONS

#: Attributes we render although the prose documentation does not list them (see module docstring).
UNDOCUMENTED_BUT_RENDERED = frozenset({("networkConnector", "staticBridge")})


def _local(tag: object) -> str | None:
    if not isinstance(tag, str):
        return None  # comments and processing instructions
    return etree.QName(tag).localname


def check_allowed(root: etree._Element) -> None:
    """Raise :class:`NotAllowedByAmazonMQError` for the first element or attribute Amazon MQ would drop."""
    if _local(root.tag) != "broker" or etree.QName(root.tag).namespace != CORE_NS:
        raise NotAllowedByAmazonMQError("/", _local(root.tag) or "?", kind="root element")
    _check(root, "/broker")


def _check(element: etree._Element, path: str) -> None:
    name = _local(element.tag)
    assert name is not None
    permitted_attributes = ATTRIBUTES.get(name, frozenset())
    for attribute in element.attrib:
        local = etree.QName(attribute).localname
        if local not in permitted_attributes:
            raise NotAllowedByAmazonMQError(path, local, kind="attribute")
    permitted_children = CHILDREN.get(name, frozenset())
    for child in element:
        child_name = _local(child.tag)
        if child_name is None:
            continue
        if child_name not in permitted_children:
            raise NotAllowedByAmazonMQError(path, child_name, kind="element")
        _check(child, f"{path}/{child_name}")
