"""The local Amazon MQ stand-in: update_broker + reboot_broker restart the real broker on the new revision."""

from __future__ import annotations

import base64
import json
import time

import boto3
import pytest

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.render import render_configuration
from brokersync_local.deploy import register_brokers
from brokersync_local.world import LocalWorld

pytestmark = pytest.mark.broker


def test_a_reboot_runs_the_current_revision_and_reports_its_states(world: LocalWorld, dr: StompConnector) -> None:
    env = world.read_env()
    mq = boto3.client(
        "mq", endpoint_url=env["aws"]["endpoint"], region_name=env["aws"]["region"],
        aws_access_key_id="local", aws_secret_access_key="local",
    )  # fmt: skip
    broker_id = register_brokers(world.topology, env["aws"]["endpoint"], env["aws"]["region"])["orders-usw2"]
    configuration_id = mq.describe_broker(BrokerId=broker_id)["Configurations"]["Current"]["Id"]
    document = render_configuration(world.topology, "dr").replace(
        '<queue physicalName="AUDIT"/>\n  </destinations>',
        '<queue physicalName="AUDIT"/>\n    <queue physicalName="LOCAL.REBOOT.PROBE"/>\n  </destinations>',
    )
    assert "LOCAL.REBOOT.PROBE" in document
    revision = mq.update_configuration(
        ConfigurationId=configuration_id, Data=base64.b64encode(document.encode()).decode()
    )
    mq.update_broker(
        BrokerId=broker_id, Configuration={"Id": configuration_id, "Revision": revision["LatestRevision"]["Revision"]}
    )
    pid_before = env["dr"]["pid"]
    bridges_before = world.brokers["primary"].bridges_established()

    mq.reboot_broker(BrokerId=broker_id)
    states = [mq.describe_broker(BrokerId=broker_id)["BrokerState"]]
    deadline = time.monotonic() + 90
    while states[-1] != "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.2)
        states.append(mq.describe_broker(BrokerId=broker_id)["BrokerState"])

    assert states[0] == "REBOOT_IN_PROGRESS"
    assert states[-1] == "RUNNING"
    assert json.loads(world.env_file.read_text())["dr"]["pid"] != pid_before
    assert "LOCAL.REBOOT.PROBE" in StatisticsClient(dr).queue_stats(["LOCAL.REBOOT.PROBE"])
    deadline = time.monotonic() + 60
    while world.brokers["primary"].bridges_established() <= bridges_before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert world.brokers["primary"].bridges_established() > bridges_before, "the bridge reconnects to the rebooted DR"
