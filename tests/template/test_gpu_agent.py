"""The prerequisite ships with the stack: the CloudWatch agent's configuration for GPU hosts (an SSM parameter), the
optional State Manager association that installs and configures the agent, and the notebook on-start script that
starts the same configuration on a SageMaker notebook instance."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from costguard.audit.reading import GPU_MEMORY_METRIC
from costguard.aws.metrics import GPU_METRIC, GPU_NAMESPACE
from costguard.aws.sagemaker import NOTEBOOK_DIMENSION
from costguard.local.template import Template
from tests.template.iam import Rendered, body, deployed_with

ROOT = Path(__file__).resolve().parents[2]
RESOURCES = Template.load(ROOT / "template.yaml").resources
# The nvidia_gpu measurements the agent knows (CloudWatch user guide, "Collect NVIDIA GPU metrics"); each is
# published as nvidia_smi_<measurement>.
AGENT_MEASUREMENTS = {
    "utilization_gpu",
    "temperature_gpu",
    "power_draw",
    "utilization_memory",
    "fan_speed",
    "memory_total",
    "memory_used",
    "memory_free",
    "pcie_link_gen_current",
    "pcie_link_width_current",
    "encoder_stats_session_count",
    "encoder_stats_average_fps",
    "encoder_stats_average_latency",
    "clocks_current_graphics",
    "clocks_current_sm",
    "clocks_current_memory",
    "clocks_current_video",
}
# What costguard reads from the agent: the sweeps' utilization, and the audit's memory in use.
READ_BY_COSTGUARD = {GPU_METRIC, GPU_MEMORY_METRIC}


def agent_config() -> dict[str, Any]:
    config: dict[str, Any] = json.loads(RESOURCES["GpuAgentConfig"]["Properties"]["Value"])
    return config


def test_the_parameter_is_one_the_agents_managed_policy_may_read() -> None:
    props = RESOURCES["GpuAgentConfig"]["Properties"]
    assert RESOURCES["GpuAgentConfig"]["Type"] == "AWS::SSM::Parameter"
    assert "Condition" not in RESOURCES["GpuAgentConfig"], "the configuration ships with every stack"
    # CloudWatchAgentServerPolicy grants ssm:GetParameter on parameter/AmazonCloudWatch-* only.
    assert Rendered(body()).value(props["Name"]) == "AmazonCloudWatch-costguard-gpu"
    assert props["Type"] == "String"


def test_the_configuration_publishes_exactly_the_series_costguard_reads() -> None:
    config = agent_config()
    assert set(config) <= {"agent", "metrics", "logs", "traces"}, "an agent configuration's sections"
    metrics = config["metrics"]
    assert metrics["namespace"] == GPU_NAMESPACE
    # The agent adds index, name and host; costguard finds a host's series by InstanceId, which only
    # append_dimensions adds (the agent resolves ${aws:InstanceId} on the host).
    assert metrics["append_dimensions"] == {"InstanceId": "${aws:InstanceId}"}
    assert set(metrics["metrics_collected"]) == {"nvidia_gpu"}
    section = metrics["metrics_collected"]["nvidia_gpu"]
    assert set(section) <= {"measurement", "metrics_collection_interval", "append_dimensions"}
    measurements = section["measurement"]
    assert len(measurements) == len(set(measurements)) and set(measurements) <= AGENT_MEASUREMENTS
    assert {f"nvidia_smi_{m}" for m in measurements} == READ_BY_COSTGUARD
    # One datapoint a minute: the idle window counts reported minutes.
    assert section["metrics_collection_interval"] == 60


def _on_with(tag_key: str) -> dict[str, bool]:
    return Template(ROOT / "template.yaml", deployed_with(body(), GpuAgentTagKey=tag_key)).conditions()


def test_the_association_exists_only_when_its_parameter_names_a_tag_key() -> None:
    assert body()["Parameters"]["GpuAgentTagKey"]["Default"] == ""
    assert _on_with("")["GpuAgentAssociationOn"] is False
    assert _on_with("costguard:gpu-agent")["GpuAgentAssociationOn"] is True
    for name in ("GpuAgentAssociation", "GpuAgentDocument"):
        assert RESOURCES[name]["Condition"] == "GpuAgentAssociationOn", name
    association = RESOURCES["GpuAgentAssociation"]["Properties"]
    assert association["Targets"] == [{"Key": "tag-key", "Values": [{"Ref": "GpuAgentTagKey"}]}]
    assert association["Name"] == {"Ref": "GpuAgentDocument"}
    assert association["Parameters"] == {"configurationLocation": [{"Ref": "GpuAgentConfig"}]}


def test_the_association_installs_then_configures_with_awss_own_documents() -> None:
    steps = RESOURCES["GpuAgentDocument"]["Properties"]["Content"]["mainSteps"]
    assert [(s["action"], s["inputs"]["documentPath"]) for s in steps] == [
        ("aws:runDocument", "AWS-ConfigureAWSPackage"),
        ("aws:runDocument", "AmazonCloudWatch-ManageAgent"),
    ]
    install, configure = (s["inputs"]["documentParameters"] for s in steps)
    assert install == {"action": "Install", "name": "AmazonCloudWatchAgent"}
    assert configure == {
        "action": "configure",
        "mode": "ec2",
        "optionalConfigurationSource": "ssm",
        "optionalConfigurationLocation": "{{ configurationLocation }}",
        "optionalRestart": "yes",
    }


def _on_start_script() -> str:
    """The notebook's on-start script as CloudFormation renders it: the configuration spliced in."""
    [script] = RESOURCES["GpuAgentNotebookLifecycle"]["Properties"]["OnStart"]
    text: str = script["Content"]["Fn::Base64"]["Fn::Sub"]
    assert text.count("${") == 1, "only the configuration is substituted"
    return text.replace("${GpuAgentConfig.Value}", RESOURCES["GpuAgentConfig"]["Properties"]["Value"])


def _run_on_start(tmp_path: Path, *, gpu: bool) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The script on a stand-in notebook: its paths moved under tmp_path, nvidia-smi and the agent's control
    script replaced by recorders."""
    fake = tmp_path / "bin"
    fake.mkdir()
    ctl = tmp_path / "amazon-cloudwatch-agent-ctl"
    ctl.write_text(f'#!/bin/bash\necho "$@" > {tmp_path / "ctl-args"}\n')
    ctl.chmod(0o755)
    if gpu:
        (fake / "nvidia-smi").write_text("#!/bin/bash\nexit 0\n")
        (fake / "nvidia-smi").chmod(0o755)
    metadata = tmp_path / "resource-metadata.json"
    metadata.write_text(json.dumps({"ResourceName": "research-notebook"}))
    script = (
        _on_start_script()
        .replace("/opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl", str(ctl))
        .replace("/opt/ml/metadata/resource-metadata.json", str(metadata))
        .replace("/opt/aws/amazon-cloudwatch-agent/etc/", f"{tmp_path}/")
    )
    jq = Path(shutil.which("jq") or "/usr/bin/jq").parent
    path = os.pathsep.join([str(fake), str(jq), "/usr/bin", "/bin"])
    ran = subprocess.run(
        ["bash", "-c", script], env={"PATH": path}, capture_output=True, text=True, timeout=30, check=False
    )
    return ran, tmp_path / "costguard-gpu.json"


@pytest.mark.skipif(shutil.which("jq") is None, reason="needs jq, as a notebook instance has")
def test_the_notebook_script_starts_the_same_section_named_by_the_notebook(tmp_path: Path) -> None:
    ran, written = _run_on_start(tmp_path, gpu=True)
    assert ran.returncode == 0, ran.stderr
    config = json.loads(written.read_text())
    ec2 = agent_config()
    section = config["metrics"]["metrics_collected"]["nvidia_gpu"]
    assert section["measurement"] == ec2["metrics"]["metrics_collected"]["nvidia_gpu"]["measurement"]
    assert section["append_dimensions"] == {NOTEBOOK_DIMENSION: "research-notebook"}
    assert "append_dimensions" not in config["metrics"]  # the notebook's own name, not an instance id
    assert config["metrics"]["namespace"] == GPU_NAMESPACE
    # Appended to the agent's configuration (a notebook ships its own), then the agent restarted.
    assert (tmp_path / "ctl-args").read_text().split() == [
        "-a",
        "append-config",
        "-m",
        "ec2",
        "-s",
        "-c",
        f"file:{written}",
    ]


def test_a_notebook_without_a_gpu_starts_untouched(tmp_path: Path) -> None:
    ran, written = _run_on_start(tmp_path, gpu=False)
    assert ran.returncode == 0, ran.stderr
    assert not written.exists() and not (tmp_path / "ctl-args").exists()


def test_the_lifecycle_script_is_bash() -> None:
    script = _on_start_script()
    assert script.startswith("#!/bin/bash\n")
    checked = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stderr


def test_the_missing_metrics_finding_tells_the_shipped_configuration() -> None:
    """gpu_metrics_missing's how-to-fix names the parameter and quotes the section the stack ships."""
    from costguard.detect.gpu import AGENT_HELP

    assert "ssm:AmazonCloudWatch-<stack>-gpu" in AGENT_HELP
    quoted = json.loads("{" + AGENT_HELP[AGENT_HELP.index('"metrics"') :] + "}")["metrics"]
    shipped = agent_config()["metrics"]
    assert quoted["append_dimensions"] == shipped["append_dimensions"]
    assert (
        quoted["metrics_collected"]["nvidia_gpu"]["measurement"]
        == shipped["metrics_collected"]["nvidia_gpu"]["measurement"]
    )
