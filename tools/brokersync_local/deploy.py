"""Creating, in the local world's moto, what ``sam deploy`` creates in AWS, from ``template.yaml``.

Read from the template rather than copied: the ledger table definition, the functions that
state machines call, and each state machine's ASL file with its DefinitionSubstitutions.
Only what the template resolves in AWS at deploy time is resolved here instead: function
ARNs (``!GetAtt X.Arn``) become moto's, parameters take their defaults, and each function
gets ``BROKERSYNC_HANDLER`` so moto's Lambda runs our handler (see ``aws_server``). The
functions read a topology file whose endpoints point at the local brokers, and the broker
secrets hold the local brokers' BrokerSync user (``wrapper.BROKERSYNC_USER``).
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import boto3
import yaml

from brokersync.config import EVERY_REGION
from brokersync.ledger.schema import create_ledger_table, load_template
from brokersync.render import render_configuration
from brokersync.topology import Topology
from brokersync_local.template_model import called_functions, default_refs, state_machines, substituted_definition
from brokersync_local.wrapper import BROKERSYNC_USER

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
#: The local world's pair is "local": what template.yaml names after PairName, named the same here.
PAIR_NAME = "local"
LEDGER_TABLE = f"brokersync-{PAIR_NAME}-ledger"
ROLE_NAME = "brokersync-local"
#: What ``!Sub ...${AWS::StackName}`` names become locally (stack name "local").
CONFIG_BUCKET = "brokersync-config-local"
RELAY_RULE = "brokersync-relay-local"
TOPOLOGY_PARAMETER = f"/brokersync/{PAIR_NAME}/topology"
AUDIT_BUCKET = "brokersync-audit-local"
SERVICE_NAME = f"brokersync-{PAIR_NAME}"
#: ``sam local invoke --env-vars`` file written into the state directory by :func:`deploy`.
SAM_ENV_VARS = "sam-env-vars.json"
#: The scheduled health probe's logical id (deployed beside the state machines' functions).
HEALTH_PROBE = "HealthProbeFunction"
#: What a function's loop runs for in the local world, so one invocation takes seconds.
LOCAL_LOOP_SECONDS = "5"


def _clients(endpoint: str, region: str) -> dict[str, Any]:
    session = boto3.session.Session(
        aws_access_key_id="local",
        aws_secret_access_key="local",  # noqa: S106 (moto accepts any credentials)
        region_name=region,
    )
    return {
        name: session.client(name, endpoint_url=endpoint)
        for name in ("lambda", "stepfunctions", "iam", "secretsmanager", "dynamodb", "mq", "s3", "events", "ssm")
    }


def write_local_topology(topology: Topology, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(topology.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
    return path


def _function_environment(template: dict[str, Any], logical_id: str, extra: dict[str, str]) -> dict[str, str]:
    resource = template["Resources"][logical_id]["Properties"]
    folder = Path(resource["CodeUri"]).name
    variables = {
        k: v
        for k, v in template.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables", {}).items()
        if isinstance(v, str)
    }
    variables.update(
        {
            k: str(v)
            for k, v in resource.get("Environment", {}).get("Variables", {}).items()
            if isinstance(v, (str, int))
        }
    )
    variables.update(extra)
    variables["BROKERSYNC_HANDLER"] = folder
    return variables


def local_machine_arn(region: str, logical_id: str) -> str:
    """A state machine's ARN in the local world (known before it exists, as ``!Sub`` builds one)."""
    return f"arn:aws:states:{region}:123456789012:stateMachine:brokersync-{logical_id}"


def local_env_vars(
    endpoint: str,
    broker_ids: dict[str, str] | None = None,
    region: str = "us-west-2",
    role_region: str = EVERY_REGION,
    peer_region: str = "",
) -> dict[str, Any]:
    """The local world's ``--env-vars`` file: every AWS call goes to moto, every name is the local one.

    ``role_region`` is what the template sets to the stack's region; the one-endpoint world keeps
    ``*`` (its one region plays every role), the two-region world gives each stack its own and
    names the other as ``peer_region`` (the template's PeerRegion).
    """
    return {
        "Parameters": {
            "AWS_ENDPOINT_URL": endpoint,
            "BROKERSYNC_LEDGER_TABLE": LEDGER_TABLE,
            "BROKERSYNC_TOPOLOGY_PARAMETER": TOPOLOGY_PARAMETER,
            "BROKERSYNC_ROLE_REGION": role_region,
            "BROKERSYNC_PEER_REGION": peer_region,
            "BROKERSYNC_BROKER_IDS": json.dumps(broker_ids or {}),
            "POWERTOOLS_SERVICE_NAME": SERVICE_NAME,
        },
        # No hand-over locally: nothing here starts the next invocation while one runs (the relay
        # workers run passes one after another), so a run would wait out its hand-over alone.
        "RelayAdvisoriesFunction": {
            "BROKERSYNC_RELAY_MAX_SECONDS": LOCAL_LOOP_SECONDS,
            "BROKERSYNC_RELAY_HAND_OVER_S": "0",
        },
        "PurgeDrFunction": {"BROKERSYNC_PURGE_MAX_SECONDS": LOCAL_LOOP_SECONDS},
        "ExportConfigFunction": {"BROKERSYNC_CONFIG_BUCKET": CONFIG_BUCKET},
        "FailoverStepsFunction": {
            "BROKERSYNC_CONFIG_BUCKET": CONFIG_BUCKET,
            "BROKERSYNC_RELAY_RULE": RELAY_RULE,
            "BROKERSYNC_RECEIPTS_FUNCTION": "",
            "BROKERSYNC_PURGE_LOOP_ARN": "",
        },
        "SnapshotQueuesFunction": {"BROKERSYNC_SNAPSHOT_BUCKET": AUDIT_BUCKET},
        "RepairLedgerFunction": {"BROKERSYNC_SNAPSHOT_BUCKET": AUDIT_BUCKET},
        "HealthProbeFunction": {
            "BROKERSYNC_PURGE_LOOP_ARN": local_machine_arn(region, "PurgeLoopStateMachine"),
            "BROKERSYNC_AUTO_FAILBACK_ARN": "",
        },
    }


def deploy(
    topology: Topology,
    state_dir: Path,
    endpoint: str,
    region: str,
    *,
    overrides: dict[str, dict[str, str]] | None = None,
    broker_ids: dict[str, str] | None = None,
    role_region: str = EVERY_REGION,
    peer_region: str = "",
) -> dict[str, str]:
    """Create table, bucket, relay rule, secrets, functions and state machines; return machine ARNs by logical id.

    ``overrides`` sets extra environment per function logical id (e.g. a shorter purge loop);
    ``broker_ids`` maps broker names to moto's broker ids (see :func:`register_brokers`);
    ``role_region`` is the region whose roles the stack's functions play (``*``: every role).
    """
    template = load_template(TEMPLATE)
    clients = _clients(endpoint, region)
    create_ledger_table(clients["dynamodb"], LEDGER_TABLE, TEMPLATE)
    location = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    with contextlib.suppress(clients["s3"].exceptions.BucketAlreadyOwnedByYou):
        clients["s3"].create_bucket(Bucket=CONFIG_BUCKET, **location)
    clients["s3"].put_bucket_versioning(Bucket=CONFIG_BUCKET, VersioningConfiguration={"Status": "Enabled"})
    with contextlib.suppress(clients["s3"].exceptions.BucketAlreadyOwnedByYou):
        clients["s3"].create_bucket(Bucket=AUDIT_BUCKET, **location)
    # The relay's schedule: locally the relay worker honours this rule's state (docs/design/local-world.md).
    clients["events"].put_rule(Name=RELAY_RULE, ScheduleExpression="rate(1 minute)", State="ENABLED")
    for broker in topology.brokers:
        secret = json.dumps({"username": BROKERSYNC_USER.username, "password": BROKERSYNC_USER.password})
        with contextlib.suppress(clients["secretsmanager"].exceptions.ResourceExistsException):
            clients["secretsmanager"].create_secret(Name=broker.credentials_secret, SecretString=secret)
    topology_file = write_local_topology(topology, state_dir / "topology.local.yaml")
    # As in AWS, the topology is also an SSM parameter: what a function reads when no file is named
    # (a built function run with the env-vars file, brokersync_local.built_functions).
    clients["ssm"].put_parameter(
        Name=TOPOLOGY_PARAMETER, Value=topology_file.read_text(encoding="utf-8"), Type="String", Overwrite=True
    )
    role_arn = _role(clients["iam"])
    env_vars = local_env_vars(endpoint, broker_ids, region, role_region, peer_region)
    (state_dir / SAM_ENV_VARS).write_text(json.dumps(env_vars, indent=2) + "\n")
    # The functions run in moto's process with the same local names the env-vars file gives a built
    # function, plus what Lambda itself would set and the topology file.
    base_environment = {
        **env_vars["Parameters"],
        "BROKERSYNC_TOPOLOGY_FILE": str(topology_file),
        "AWS_DEFAULT_REGION": region,
        "AWS_REGION": region,
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "POWERTOOLS_METRICS_NAMESPACE": "BrokerSync",
        "BROKERSYNC_CONFIG_BUCKET": CONFIG_BUCKET,
        "BROKERSYNC_SNAPSHOT_BUCKET": AUDIT_BUCKET,
        "BROKERSYNC_RELAY_RULE": RELAY_RULE,
    }
    machines = state_machines(template)
    # State machine ARNs are known before they exist (as ``!Sub`` builds them in the template).
    machine_arns = {logical_id: local_machine_arn(region, logical_id) for logical_id in machines}
    base_environment["BROKERSYNC_PURGE_LOOP_ARN"] = machine_arns.get("PurgeLoopStateMachine", "")
    arns: dict[str, str] = {}
    # The state machines' functions, and the health probe (scheduled in AWS; a drill invokes it).
    for logical_id in sorted(called_functions(template) | {HEALTH_PROBE}):
        environment = _function_environment(
            template, logical_id, {**base_environment, **(overrides or {}).get(logical_id, {})}
        )
        arns[logical_id] = _function(clients["lambda"], f"brokersync-{logical_id}", role_arn, environment)
    created: dict[str, str] = {}
    refs = default_refs(template, region, "123456789012", "local") | {"PairName": PAIR_NAME}
    for logical_id, properties in machines.items():
        definition = json.dumps(substituted_definition(properties, ROOT, arns.__getitem__, refs))
        created[logical_id] = _state_machine(clients["stepfunctions"], f"brokersync-{logical_id}", definition, role_arn)
        if created[logical_id] != machine_arns[logical_id]:
            raise RuntimeError(f"moto named {logical_id} {created[logical_id]}, expected {machine_arns[logical_id]}")
    return created


def register_brokers(topology: Topology, endpoint: str, region: str) -> dict[str, str]:
    """Create each broker in moto's Amazon MQ with its rendered configuration as the current revision.

    Each broker is created in its topology region (``region`` when it names none), because
    Amazon MQ answers for a broker only there. Returns broker ids by name. Existing brokers
    (a second deploy) are reused as they are.
    """
    ids: dict[str, str] = {}
    for broker in topology.brokers:
        mq = _clients(endpoint, broker.region or region)["mq"]
        existing = {b["BrokerName"]: b["BrokerId"] for b in mq.list_brokers().get("BrokerSummaries", [])}
        if broker.name in existing:
            ids[broker.name] = existing[broker.name]
            continue
        configuration = mq.create_configuration(
            Name=f"{broker.name}-configuration", EngineType="ACTIVEMQ", EngineVersion="5.17.6"
        )
        data = base64.b64encode(render_configuration(topology, broker.role).encode()).decode()
        revision = mq.update_configuration(ConfigurationId=configuration["Id"], Data=data)["LatestRevision"]["Revision"]
        created = mq.create_broker(
            BrokerName=broker.name,
            DeploymentMode="SINGLE_INSTANCE",
            EngineType="ACTIVEMQ",
            EngineVersion="5.17.6",
            HostInstanceType="mq.m5.large",
            PubliclyAccessible=False,
            AutoMinorVersionUpgrade=False,
            Users=[{"Username": "local", "Password": "local-password"}],
            Configuration={"Id": configuration["Id"], "Revision": revision},
        )
        ids[broker.name] = created["BrokerId"]
    return ids


def _role(iam: Any) -> str:
    policy = json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
            ],
        }
    )
    try:
        return iam.create_role(RoleName=ROLE_NAME, AssumeRolePolicyDocument=policy)["Role"]["Arn"]
    except iam.exceptions.EntityAlreadyExistsException:
        return iam.get_role(RoleName=ROLE_NAME)["Role"]["Arn"]


def _empty_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("app.py", "# routed to functions/ by brokersync_local.aws_server\n")
    return buffer.getvalue()


def _function(client: Any, name: str, role_arn: str, environment: dict[str, str]) -> str:
    with contextlib.suppress(client.exceptions.ResourceNotFoundException):
        client.delete_function(FunctionName=name)
    created = client.create_function(
        FunctionName=name,
        Runtime="python3.13",
        Role=role_arn,
        Handler="app.lambda_handler",
        Code={"ZipFile": _empty_zip()},
        Timeout=60,
        MemorySize=512,
        Environment={"Variables": environment},
    )
    return created["FunctionArn"]


def _state_machine(client: Any, name: str, definition: str, role_arn: str) -> str:
    for existing in client.list_state_machines()["stateMachines"]:
        if existing["name"] == name:
            client.update_state_machine(stateMachineArn=existing["stateMachineArn"], definition=definition)
            return existing["stateMachineArn"]
    return client.create_state_machine(name=name, definition=definition, roleArn=role_arn)["stateMachineArn"]
