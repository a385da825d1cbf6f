"""Changes leave as pull requests (issue 44): the forge a remote lives on, the branch and
commit of exactly the files a session changed, the push through the guard, the pull or
merge request opened through the forge's maintained client, and its body.

Layer: below ``tools`` (the ``pull_request`` tool drives it), above ``terraform`` (plans,
bindings), ``guard`` (every git command runs through :class:`~iac_kernel.guard.call.GuardedCall`),
``team`` (the approval rule that applies) and ``egress`` (the broker's table says which
token belongs to the API host). Never imports the agent or a front.

* :mod:`.remote`: which forge a remote URL is on and its API base;
* :mod:`.gitrun`: git through the guard (inspect, commit, push);
* :mod:`.body`: the reviewer's body, within the forge's limits;
* :mod:`.notebook`: the session as a notebook, committed beside the change;
* :mod:`.clients`: the token for the API host and the PyGithub / python-gitlab calls;
* :mod:`.review`: an apply bound to a reviewed request (item 2), and a request's head
  checked out and its plan posted (item 3).
"""
