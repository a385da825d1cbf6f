"""Terraform's sensitive files written during a guarded call, kept from the call's shell.

* :mod:`.writes`: what a guarded terraform/tofu may write and where (read from its
  command line before it starts), and ``init`` without input;
* :mod:`.held`: those files made ready to be covered, and put back afterwards;
* :mod:`.cover`: the shell's mount namespaces: placeholders over the held files while
  terraform runs, masked copies over what it wrote once it returns;
* ``cover_helper.py``: the helper process that mounts inside a namespace.
"""
