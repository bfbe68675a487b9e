"""An EKS node that HyperPod runs is read by its own instance (AWS's providerID shape), not its last path segment."""

from __future__ import annotations

from costguard.detect.eks import node_of


def test_a_hyperpod_node_of_an_eks_cluster_is_read_as_its_instance() -> None:
    item = {
        "metadata": {"name": "hyperpod-i-0123456789abcdef0", "labels": {}},
        "spec": {
            "providerID": "aws:///us-east-1a/sagemaker/cluster/hyperpod-abc123def456-i-0123456789abcdef0"
        },
        "status": {"allocatable": {"nvidia.com/gpu": "8"}},
    }
    node = node_of(item, lambda _: 0)
    assert node.instance_id == "i-0123456789abcdef0"
    assert node.gpus == 8


def test_an_ec2_node_and_a_fargate_node() -> None:
    ec2 = {"metadata": {"name": "n"}, "spec": {"providerID": "aws:///us-east-1a/i-0abc0000000000001"}}
    fargate = {"metadata": {"name": "f"}, "spec": {"providerID": "aws:///us-east-1a/fargate-ip-10-0-0-1"}}
    assert node_of(ec2, lambda _: 0).instance_id == "i-0abc0000000000001"
    assert node_of(fargate, lambda _: 0).instance_id is None
