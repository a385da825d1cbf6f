"""The adversarial corpus: however a changing command is written, it is asked per call
at exec time and never reaches the (fake) program when rejected; read-only commands run
without a question. Real bwrap, real bash, fake CLIs that record their argv."""

from __future__ import annotations

import base64
import shlex
from pathlib import Path

import pytest

from guard_support import Asker, Harness, changing_calls, gather_limited, logged, make_fakes
from iac_kernel.agent.permissions import ALLOW_ALWAYS, ALLOW_ONCE, REJECT_ONCE
from iac_kernel.guard.sandbox.bwrap import unusable_reason
from iac_kernel.tools import tf_guard
from iac_kernel.tools.danger import literal_commands

pytestmark = pytest.mark.skipif(unusable_reason() is not None, reason="bubblewrap unusable")


def nested(command: str, depth: int) -> str:
    """``command`` inside ``depth`` levels of ``sh -c``."""
    for _ in range(depth):
        command = "sh -c " + shlex.quote(command)
    return command


B64 = base64.b64encode(b"terraform apply -auto-approve").decode()
SOCKET_ATTACK = (
    "import array, json, socket, struct; s = socket.socket(socket.AF_UNIX); "
    "s.connect('/tmp/.iac-guard/sock'); "
    "d = json.dumps({'program': 'terraform', 'argv': ['terraform', 'apply'], "
    "'cwd': '.', 'env': {}, 'fds': [1, 2]}).encode(); "
    "s.sendmsg([struct.pack('!I', len(d))], "
    "[(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', [1, 2]))]); "
    "s.sendall(d); print(s.recv(1000))"
)
#: A minimal repository git recognises (made by hand: `git` is a fake here).
GIT_DIR = "mkdir -p .git/objects .git/refs && echo ref: refs/heads/main > .git/HEAD"

#: Every entry runs at least one changing command of a guarded program.
CORPUS = [
    # terraform / tofu / terragrunt, plainly
    "terraform apply -auto-approve",
    "terraform destroy -auto-approve",
    "terraform -chdir=envs/prod apply",
    "terraform import aws_s3_bucket.b b",
    "terraform state rm aws_instance.web",
    "terraform state mv a.b c.d",
    "terraform state push x.tfstate",
    "terraform state replace-provider a b",
    "terraform force-unlock 1234",
    "terraform taint aws_instance.web",
    "terraform untaint aws_instance.web",
    "terraform workspace delete staging",
    "tofu apply",
    "tofu destroy",
    "terragrunt apply",
    "terragrunt run-all apply",
    "terragrunt run-all destroy",
    # the shell's expansions
    "t=terraform; $t apply",
    "$(echo terraform) apply",
    "`echo terraform` apply",
    "${T:-terraform} apply",
    "terraform $'apply'",
    "te''rra\"\"form apply",
    "\\terraform apply",
    "terra\\\nform apply",
    'T=(terraform destroy -auto-approve); "${T[@]}"',
    "IFS=_; c=terraform_apply; $c",
    "$(printf 'terr%s' aform) apply",
    "a=ter; b=raform; $a$b apply",
    "eval 'terraform apply'",
    'eval "$(echo terraform apply)"',
    f"echo {B64} | base64 -d | sh",
    f'bash -c "$(echo {B64} | base64 -d)"',
    "printf 'terraform apply' | bash",
    "bash <<< 'terraform apply'",
    nested("terraform apply", 6),
    'bash -c \'bash -c "bash -c \\"terraform apply\\""\'',
    "source <(echo terraform apply)",
    "shopt -s expand_aliases\nalias tf=terraform\ntf apply",
    'f() { terraform "$@"; }; f destroy',
    "exec terraform apply",
    "command terraform apply",
    "builtin eval terraform apply",
    # files written, then run
    "printf '#!/bin/sh\\nterraform destroy\\n' > d.sh && chmod +x d.sh && ./d.sh",
    "printf 'terraform apply\\n' > d.sh && . ./d.sh",
    "printf 'deploy:\\n\\tterraform apply -auto-approve\\n' > Makefile && make deploy",
    'printf \'import subprocess\\nsubprocess.run(["terraform", "apply"])\\n\' > x.py'
    " && python3 x.py",
    # interpreters and runners
    "python3 -c \"import subprocess; subprocess.run(['terraform', 'apply'])\"",
    "python3 -c \"import os; os.execvp('terraform', ['terraform', 'destroy'])\"",
    "python3 -c \"import os; os.system('kubectl delete ns prod')\"",
    "python3 -c \"import shutil, subprocess; subprocess.call([shutil.which('helm'), 'un', 'x'])\"",
    'perl -e \'exec "terraform", "apply"\'',
    "awk 'BEGIN { system(\"terraform apply\") }'",
    "echo apply | xargs terraform",
    "echo 'terraform apply' | xargs -I{} sh -c '{}'",
    "find . -maxdepth 0 -exec terraform apply \\;",
    "nohup terraform apply",
    "timeout 20 terraform apply",
    "setsid -w terraform apply",
    "nice -n 5 terraform apply",
    "stdbuf -o0 terraform apply",
    "time terraform apply",
    "script -qc 'terraform apply' /dev/null",
    "env -i /bin/sh -c 'terraform apply'",
    'env -i PATH="$PATH" terraform apply',
    "(exec -a kubectl terraform destroy)",
    "exec -a foo terraform apply",
    # the binary itself: paths, links, copies
    '"$(command -v terraform)" apply',
    '/proc/self/root"$(command -v terraform)" apply',
    'ln -s "$(command -v terraform)" tf && ./tf apply',
    'cp "$(command -v terraform)" tf2 && ./tf2 apply',
    'cat "$(command -v terraform)" > tf3 && chmod +x tf3 && ./tf3 apply',
    'ln "$(command -v terraform)" hl || cp "$(command -v terraform)" hl; ./hl apply',
    'find / -name terraform -type f 2>/dev/null | head -3 | while read f; do "$f" apply; done',
    f'python3 -c "{SOCKET_ATTACK}"',
    # kubectl
    "kubectl apply -f app.yaml",
    "kubectl create namespace x",
    "kubectl -n prod delete pod web-1",
    "kubectl replace -f app.yaml",
    "kubectl patch deploy web -p '{}'",
    "kubectl edit deploy web",
    "kubectl scale deploy web --replicas=0",
    "kubectl rollout restart deploy/web",
    "kubectl rollout undo deploy/web",
    "kubectl drain node-1",
    "kubectl cordon node-1",
    "kubectl taint nodes n1 k=v:NoSchedule",
    "kubectl set image deploy/web web=nginx:2",
    "kubectl label pods web a=b --overwrite",
    "kubectl annotate pods web a=b --overwrite",
    "K=kubectl; $K delete pod x",
    # helm
    "helm install web ./chart",
    "helm upgrade web ./chart",
    "helm uninstall web",
    "helm un web",
    "helm del web",
    "helm delete web",
    "helm rollback web 1",
    # aws
    "aws ec2 terminate-instances --instance-ids i-1",
    "aws s3 rm s3://b/k",
    "aws s3 mv s3://b/k s3://b/j",
    "aws s3 sync . s3://b --delete",
    "aws cloudformation deploy --template-file t.yaml --stack-name s",
    "aws iam put-role-policy --role-name r",
    "aws rds modify-db-instance --db-instance-identifier d",
    "aws lambda update-function-code --function-name f",
    "aws ec2 create-vpc --cidr-block 10.0.0.0/16",
    "aws --profile prod s3api delete-bucket --bucket b",
    # gcloud, gsutil, az, pulumi
    "gcloud compute instances delete vm-1",
    "gcloud run deploy svc",
    "gcloud sql instances create db",
    "gsutil rm gs://b/k",
    "gsutil rsync -d . gs://b",
    "az group delete --name rg",
    "az vm create --name v",
    "az storage blob delete-batch -s c",
    "az webapp update --name w",
    "pulumi up --yes",
    "pulumi destroy",
    "pulumi refresh --yes",
    "pulumi import aws:s3/bucket:Bucket b b",
    "pulumi state delete urn",
    # git: forced pushes in every form
    "git push -f",
    "git push --force origin main",
    "git push --force-with-lease origin main",
    "git push origin +main",
    "git push origin +HEAD:main",
    "git push origin :main",
    "git push --delete origin feature",
    "git push --mirror",
    "git -C . push -uf origin main",
    "git -c alias.p='push -f' p",
    # (a minimal valid .git: git ignores a .git directory without HEAD, objects, refs)
    f"{GIT_DIR} && printf '[remote \"origin\"]\\n\\tpush = +refs/heads/*:refs/heads/*\\n'"
    " > .git/config && git push origin",
    f"{GIT_DIR} && printf '[remote \"origin\"]\\n\\tmirror = true\\n' > .git/config && git push",
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.push GIT_CONFIG_VALUE_0=+refs/heads/main"
    " git push origin",
]

#: Read-only commands: they run, with no question at all.
CONTROL = [
    "terraform plan -out=ctrl.plan",
    "terraform validate",
    "terraform fmt -check",
    "terraform show -json ctrl.plan",
    "terraform output -json",
    "terraform state list",
    "kubectl get pods -A",
    "kubectl describe pod web",
    "kubectl logs web",
    "helm list",
    "helm status web",
    "aws s3 ls s3://b",
    "aws ec2 describe-instances",
    "gcloud compute instances list",
    "gsutil ls gs://b",
    "az vm list",
    "pulumi preview",
    "git status",
    "git log --oneline",
    "git diff",
]


def test_corpus_is_big_enough():
    assert len(CORPUS) >= 80
    assert len(set(CORPUS)) == len(CORPUS)


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    bin_dir, log = make_fakes(tmp_path)
    return Harness(tmp_path / "ws", bin_dir, log)


async def _run_all(
    harness: Harness, commands: list[str], asker_for, tmp: Path, shared: bool = False
):
    """Run ``commands`` in parallel, each in its own cwd (or all in the harness's)."""

    async def one(i: int, command: str):
        cwd = harness.cwd if shared else tmp / f"w{i}"
        cwd.mkdir(parents=True, exist_ok=True)
        ask = asker_for()
        result = await harness.run(command, ask, cwd=cwd, timeout=60)
        return command, ask, result

    return await gather_limited([one(i, c) for i, c in enumerate(commands)])


def _check_rejected(outcomes, harness: Harness) -> None:
    problems = []
    for command, ask, result in outcomes:
        if not ask.per_call_questions():
            problems.append(f"never asked per call: {command!r}: {result and result.content}")
        if not literal_commands(command) and not ask.exec_questions():
            problems.append(f"hidden command not asked at exec time: {command!r}")
        if any(ALLOW_ALWAYS in r.options for r in ask.exec_questions()):
            problems.append(f"an exec question offered 'always': {command!r}")
    reached = changing_calls(harness.log)
    assert not reached, f"changing commands reached the program: {reached}"
    assert not problems, "\n".join(problems)


async def test_bypass_every_changing_command_is_asked_and_rejected(harness, tmp_path):
    """Bypass mode: bash runs unasked unless its text is flagged; a flagged text that
    hides what runs is approved, so the exec-time guard must catch each changing exec."""
    outcomes = await _run_all(harness, CORPUS, Asker, tmp_path)
    _check_rejected(outcomes, harness)
    # The exec-time question names the exact argv and the cwd, and offers no "always".
    sample = next(o for o in outcomes if o[0] == "t=terraform; $t apply")
    question = sample[1].exec_questions()[0]
    assert question.input["argv"] == ["terraform", "apply"]
    assert question.input["cwd"] == str(tmp_path / f"w{CORPUS.index(sample[0])}")
    assert question.options == [ALLOW_ONCE, REJECT_ONCE]
    assert "guard: terraform was not run" in sample[2].content
    assert "[exit code 126]" in sample[2].content


async def test_allow_always_answers_still_ask_each_changing_exec(tmp_path):
    """Default mode, the user answering "Allow always" wherever it is offered: the
    remembered prefixes let the bash calls run unasked, and each changing exec is still
    asked per call."""
    bin_dir, log = make_fakes(tmp_path)
    harness = Harness(tmp_path / "ws", bin_dir, log, mode="default")
    scripts = [
        "printf 'deploy:\\n\\tterraform apply -auto-approve\\n' > Makefile",
        'printf \'import subprocess\\nsubprocess.run(["helm", "un", "x"])\\n\' > x.py',
        "printf '#!/bin/sh\\nkubectl delete ns prod\\n' > deploy.sh && chmod +x deploy.sh",
    ]
    for line in scripts:
        await harness.run(line, Asker(routine=ALLOW_ALWAYS))
    commands = ["make deploy", "python3 x.py", "./deploy.sh"]
    for command in commands:  # first time: "Allow always" for the prefixes
        await harness.run(command, Asker(routine=ALLOW_ALWAYS))
    remembered = {r["prefix"] for r in harness.gate.remembered_prefixes()}
    assert {"make deploy", "python3 x.py", "./deploy.sh"} <= remembered
    assert "bash" not in harness.gate.remembered
    again = await _run_all(
        harness, commands * 2, lambda: Asker(routine=REJECT_ONCE), tmp_path, shared=True
    )
    for command, ask, _result in again:
        assert [r for r in ask.requests if "argv" not in r.input] == [], command
        assert len(ask.exec_questions()) == 1, command
    assert changing_calls(log) == []


async def test_control_commands_run_without_any_question(harness, tmp_path):
    outcomes = await _run_all(harness, CONTROL, Asker, tmp_path)
    for command, ask, result in outcomes:
        assert not ask.requests, (command, [r.reason for r in ask.requests])
        assert result is not None and not result.is_error, (command, result.content)
        assert "fake" in result.content and "ran" in result.content, (command, result.content)
    ran = {"|".join(argv) for argv in logged(harness.log)}
    for command in CONTROL:
        assert command.replace(" ", "|") in ran, command


async def test_approved_exec_runs_with_the_exact_argv(harness, tmp_path):
    tf_guard.register()  # as the agent's tools do: an apply runs where it was asked
    ask = Asker(exec_answer=ALLOW_ONCE)
    result = await harness.run("t=terraform; $t apply -var 'a=b c'", ask)
    assert result is not None and "fake terraform ran" in result.content
    folder = f"-chdir={harness.cwd.resolve()}"
    assert logged(harness.log) == [["terraform", folder, "apply", "-var", "a=b c"]]
    assert len(ask.exec_questions()) == 1
