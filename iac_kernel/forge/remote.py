"""Which forge a git remote lives on, and where its API is, from the remote's URL alone.

* ``github.com`` is GitHub; its API is ``https://api.github.com`` (or ``GITHUB_API_URL``
  when that names ``api.github.com``'s host, as GitHub's own runners set it).
* A host named by ``GH_HOST`` (gh's variable; a comma list is accepted here) is GitHub
  Enterprise; its API is ``SCHEME://HOST/api/v3`` (``GITHUB_API_URL`` when it names that
  host, as Enterprise runners set it).
* ``gitlab.com``, a host named by ``GITLAB_HOST`` (glab's variable, a host or a URL) or
  ``CI_SERVER_URL`` (GitLab's runners), is GitLab; python-gitlab takes the remote's base
  URL (``SCHEME://HOST``, or the URL ``GITLAB_HOST`` gives, for a relative root).
* Any other host is refused with one line naming the variable that would say which.

Remotes may be ``https://``, ``http://`` (a loopback test server), ``ssh://`` or scp-like
``git@host:owner/repo.git``; the project path is what follows the host, ``.git`` removed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

GITHUB = "github"
GITLAB = "gitlab"
#: The names a person reads.
FORGE_NAMES = {GITHUB: "GitHub", GITLAB: "GitLab"}
GITHUB_COM = "github.com"
GITLAB_COM = "gitlab.com"
_SCP = re.compile(r"^(?:(?P<user>[^@/]+)@)?(?P<host>[^:/]+):(?P<path>[^/].*)$")


class ForgeError(Exception):
    """Bad input for a pull request: the message is one line saying what was wrong."""


@dataclass(frozen=True)
class Remote:
    """A git remote as a forge sees it."""

    name: str
    url: str
    forge: str
    #: ``host`` or ``host:port`` as written in the URL (lower case).
    host: str
    #: ``owner/repo`` (GitLab: ``group/sub/project``), without ``.git``.
    project: str
    #: Where the forge's REST API is (PyGithub's ``base_url``; python-gitlab's ``url``).
    api_url: str
    #: The forge's web address of the project.
    web_url: str

    @property
    def forge_name(self) -> str:
        return FORGE_NAMES[self.forge]


def _hosts(value: str) -> set[str]:
    """Host names (``host`` or ``host:port``) of a comma list of hosts or URLs."""
    found = set()
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        parts = urlsplit(item if "://" in item else f"https://{item}")
        if parts.netloc:
            found.add(parts.netloc.rpartition("@")[2].lower())
    return found


def parse_url(url: str) -> tuple[str, str, str]:
    """(scheme, ``host[:port]``, project path) of a remote URL; ForgeError when it is not
    a URL a forge serves (a local path, a ``file://`` URL)."""
    text = url.strip()
    if "://" in text:
        parts = urlsplit(text)
        scheme = parts.scheme.lower()
        if scheme not in ("https", "http", "ssh", "git"):
            raise ForgeError(f"the remote {text} is not on a forge ({scheme}:// URL)")
        host = parts.netloc.rpartition("@")[2].lower()
        path = parts.path
    else:
        found = _SCP.match(text)
        if found is None or text.startswith(("/", ".")):
            raise ForgeError(f"the remote {text} is a local path, not a forge")
        scheme, host, path = "ssh", found["host"].lower(), found["path"]
    project = path.strip("/").removesuffix(".git").strip("/")
    if not host or "/" not in project:
        raise ForgeError(f"the remote {text} names no owner/repository")
    return scheme, host, project


def _web_scheme(scheme: str) -> str:
    """The API's scheme: what an HTTP remote uses, https for ssh and git remotes."""
    return scheme if scheme in ("http", "https") else "https"


def _bare_host(host: str) -> str:
    return host.partition(":")[0] if not host.startswith("[") else host


def forge_of(name: str, url: str, env: Mapping[str, str]) -> Remote:
    """The :class:`Remote` named ``name`` with ``url`` (see the module doc); ForgeError
    for a remote on no forge this knows."""
    scheme, host, project = parse_url(url)
    web = _web_scheme(scheme)
    # ssh remotes name the ssh port, never the web one: the API is on the bare host.
    api_host = host if scheme in ("http", "https") else _bare_host(host)
    given = (env.get("GITHUB_API_URL") or "").strip().rstrip("/")
    given_host = _hosts(given).pop() if given else ""
    if _bare_host(host) in (GITHUB_COM, f"www.{GITHUB_COM}"):
        api = given if given_host == f"api.{GITHUB_COM}" else f"https://api.{GITHUB_COM}"
        return Remote(name, url, GITHUB, host, project, api, f"https://{GITHUB_COM}/{project}")
    if host in _hosts(env.get("GH_HOST", "")) or api_host in _hosts(env.get("GH_HOST", "")):
        api = given if given_host == api_host else f"{web}://{api_host}/api/v3"
        return Remote(name, url, GITHUB, host, project, api, f"{web}://{api_host}/{project}")
    gitlab_base = _gitlab_base(api_host, web, env)
    if gitlab_base is not None:
        root = urlsplit(gitlab_base).path.strip("/")
        if root and project.startswith(root + "/"):  # a GitLab under a relative root
            project = project[len(root) + 1 :]
        return Remote(name, url, GITLAB, host, project, gitlab_base, f"{gitlab_base}/{project}")
    raise ForgeError(
        f"the remote {name} ({url}) is on {api_host}, neither GitHub nor GitLab as far as "
        "this session knows: set GH_HOST for GitHub Enterprise or GITLAB_HOST for GitLab"
    )


def _gitlab_base(host: str, scheme: str, env: Mapping[str, str]) -> str | None:
    """python-gitlab's ``url`` for a remote on ``host``, if that host is GitLab."""
    if _bare_host(host) == GITLAB_COM:
        return f"https://{GITLAB_COM}"
    for variable in ("GITLAB_HOST", "CI_SERVER_URL"):
        for item in (env.get(variable) or "").split(","):
            item = item.strip().rstrip("/")
            if item and host in _hosts(item):
                # A URL keeps its path: a GitLab under a relative root (https://h/gitlab).
                return item if "://" in item else f"{scheme}://{item}"
    return None
