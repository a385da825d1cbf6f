"""The dangerous-command table: what needs a per-call approval."""

from __future__ import annotations

import pytest

from iac_kernel.tools.danger import RULES, dangerous_reason, judge

DANGEROUS = [
    "terraform apply",
    "terraform apply -auto-approve tfplan",
    "terraform destroy -target=module.vpc",
    "tofu apply",
    "terragrunt apply",
    "terragrunt run-all apply",
    "terragrunt run --all -- destroy",
    "terragrunt destroy-all",
    "terraform import aws_s3_bucket.logs logs-bucket",
    "terraform state rm aws_instance.web",
    "terraform state mv a.b c.d",
    "terraform state push terraform.tfstate",
    "terraform state replace-provider hashicorp/aws registry.acme.corp/acme/aws",
    "terraform force-unlock 1234",
    "terraform taint aws_instance.web",
    "terraform workspace delete staging",
    "terraform -chdir=envs/prod apply",
    "/usr/local/bin/terraform apply",
    "cd envs/prod && terraform apply -auto-approve",
    "cd envs/prod; terraform destroy",
    "terraform plan -out=tf.plan || terraform apply tf.plan",
    "TF_LOG=debug AWS_PROFILE=prod terraform apply",
    "env TF_INPUT=0 terraform apply",
    "sudo -u deploy terraform destroy",
    "time terraform apply",
    "timeout 600 terraform apply -auto-approve",
    "terraform plan\nterraform apply",
    "terraform plan && \\\n  terraform apply",
    'bash -c "terraform apply -auto-approve"',
    "sh -ec 'cd prod && tofu destroy'",
    'eval "terraform destroy"',
    "echo $(terraform destroy -auto-approve)",
    'echo "state: $(terraform state rm a.b)"',
    "echo `terraform apply`",
    "yes yes | terraform apply",
    "terraform apply 2>&1 | tee apply.log",
    "(cd prod && terraform apply)",
    "rm -rf .terraform",
    "rm -fr build/",
    "rm -r modules/old",
    "rm --recursive --force dist",
    "find . -name '*.tfstate.backup' | xargs rm -rf",
    "find . -name '*.bak' -delete",
    "kubectl delete namespace prod",
    "kubectl -n prod delete pod web-1",
    "kubectl drain node-1 --ignore-daemonsets",
    "helm uninstall ingress",
    "aws ec2 terminate-instances --instance-ids i-123",
    "aws s3api delete-bucket --bucket logs",
    "aws --profile prod rds delete-db-instance --db-instance-identifier db",
    "aws s3 rm s3://bucket/key",
    "aws s3 rb s3://bucket --force",
    "gcloud compute instances delete vm-1",
    "az group delete --name rg",
    "git push --force origin main",
    "git push -f",
    "git push --force-with-lease=main origin main",
    "git push origin --delete feature",
    "git reset --hard HEAD~3",
    "git clean -fdx",
    "pulumi up --yes",
    "pulumi destroy",
    "cdk deploy --all",
    "make apply ENV=prod",
    "ssh bastion 'terraform destroy'",
    "dd if=/dev/zero of=/dev/sda",
    "mkfs.ext4 /dev/sdb1",
    # the exec-time rules of the guard also apply to the text
    "git push origin +main",
    "git push origin :main",
    "helm un web",
    "helm upgrade web ./chart",
    "helm rollback web 1",
    "kubectl apply -f app.yaml",
    "kubectl scale deploy/web --replicas=0",
    "kubectl rollout undo deploy/web",
    "aws s3 sync . s3://bucket --delete",
    "aws cloudformation deploy --stack-name s",
    "pulumi refresh --yes",
    "terraform untaint aws_instance.web",
]

SAFE = [
    "terraform plan",
    "terraform plan -destroy -out=destroy.plan",
    "terraform init -upgrade",
    "terraform validate",
    "terraform fmt -recursive -check",
    "terraform state list",
    "terraform state show aws_instance.web",
    "terraform workspace list",
    "terraform output -json",
    "terraform show -json tfplan",
    "tofu plan",
    "terragrunt run-all plan",
    "tflint --recursive",
    "checkov -d .",
    "rm plan.out",
    "rm -f crash.log",
    "ls -la && cat main.tf",
    "kubectl get pods -A",
    "kubectl apply --dry-run=client -f x.yaml",
    "helm list",
    "helm template chart",
    "aws ec2 describe-instances",
    "aws s3 ls s3://bucket",
    "git push origin main",
    "git status && git diff",
    "git log --grep=apply",
    "grep -rn 'terraform apply' docs/",
    "echo 'terraform destroy is dangerous'",
    'git commit -m "rm -rf the old module"',
    "find . -name '*.tf'",
    "make plan",
    "",
    'echo "unbalanced',
]


@pytest.mark.parametrize("command", DANGEROUS)
def test_dangerous(command: str):
    assert dangerous_reason(command), command


@pytest.mark.parametrize("command", SAFE)
def test_safe(command: str):
    assert dangerous_reason(command) is None, (command, dangerous_reason(command))


def test_reason_names_the_command_and_effect():
    assert (
        dangerous_reason("cd x && terraform destroy")
        == "terraform destroy: destroys infrastructure"
    )
    assert (
        dangerous_reason("tofu state rm a.b") == "tofu state rm: removes resources from the state"
    )


@pytest.mark.parametrize(("programs", "rule"), RULES)
def test_every_row_is_reached(programs, rule):
    """No row is shadowed by the guard's rules: a command only it matches is asked, with
    its reason."""
    program = programs.split()[0]
    command = " ".join([program, *rule.words, *rule.flags[:1]])
    assert dangerous_reason(command) == f"{' '.join([program, *rule.words])}: {rule.reason}"


def test_one_call_time_question():
    """judge decides the gate's question: left to exec time, per call, or routine with
    the prefixes "allow always" remembers."""
    reviewed = frozenset({"terraform", "tofu"})
    left = judge("terraform apply p.tfplan", reviewed)
    assert left.at_exec and left.reason is None
    beside = judge("terraform apply p.tfplan && rm -rf x", reviewed)
    assert not beside.at_exec and beside.reason.startswith("rm: deletes a directory tree. ")
    # Without a sandbox, an apply beside anything else may start terraform past the guard.
    sourced = judge(". ./ci.env; terraform apply p.tfplan", reviewed, sandboxed=False)
    assert not sourced.at_exec and sourced.reason.startswith("terraform apply: ")
    routine = judge("terraform plan -out=x && terraform show x", reviewed)
    assert routine.reason is None and not routine.at_exec
    assert routine.prefixes == ["terraform plan", "terraform show"]
    assert judge("echo  $HOME").prefixes == ["echo $HOME"]  # expansions: the exact text
