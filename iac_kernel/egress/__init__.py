"""The sandbox's only way out: an egress proxy the agent runs outside every sandbox.

It decides which hosts a session may reach and brokers credentials (placeholders inside
the sandbox, real values swapped in on the way to the hosts they belong to). The proxy
engine is mitmproxy, which runs in an environment of its own (:mod:`.environment`): its
pins (tornado, h11, cryptography) clash with Jupyter's.
"""
