"""Plan-first Terraform / OpenTofu: plans as data, sensitive-value masking, apply review.

Below the tools layer: nothing here imports ``agent``, ``kernel``, ``acp`` or ``tools``.

* :mod:`.cli` finds and runs ``terraform`` / ``tofu``;
* :mod:`.plan` turns ``show -json PLANFILE`` into a :class:`~.plan.Plan`;
* :mod:`.summary` writes a plan as text (the model's table, one address's detail);
* :mod:`.sensitive` collects the values Terraform marks sensitive and masks them;
* :mod:`.workspace` finds them in a working directory (state, plan files, tfvars), cached;
* :mod:`.review` binds an apply approval to the plan file's bytes;
* :mod:`.policy` runs checkov on a plan (optional);
* :mod:`.commands` reads terraform command lines (plan ``-out``, apply targets).
"""
