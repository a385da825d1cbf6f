"""Plan-first Terraform / OpenTofu: plans as data, sensitive-value masking, apply review.

Below the tools layer: nothing here imports ``agent``, ``kernel``, ``acp`` or ``tools``.

* :mod:`.cli` finds and runs ``terraform`` / ``tofu``, and shows a plan file sandboxed;
* :mod:`.commands` reads terraform command lines (plan ``-out``, what an apply does);
* :mod:`.plan` turns ``show -json PLANFILE`` into a :class:`~.plan.Plan` (review order,
  a bounded dict); :mod:`.summary` shows it (the model's table, one address's detail,
  the apply question, the plan card's rows);
* :mod:`.sensitive` collects the values Terraform marks sensitive and masks them;
  :mod:`.workspace` finds them in a working directory (state, plan files, the
  configuration: :mod:`.config_scan`, :mod:`.backends`), cached, and writes masked
  copies of its files (:mod:`.tffiles` recognises and masks them);
* :mod:`.review` binds an apply approval to the plan file's bytes (and its audit
  record); :mod:`.binding` fixes what a changing command acts on; :mod:`.policy` runs
  checkov on a plan (optional).
"""
