"""Hosts on one machine: each a network, mount and UTS namespace with its own address, hostname, /tmp and $HOME.

A host's processes see only its own ``/tmp`` and ``$HOME`` (``/home/fgr``), so a file one host writes there is
not on another; they reach each other only through the bridge, by address or by the names in the shared
``/etc/hosts`` (what DNS would give). What every real host has installed is visible on each: the system,
Java, the project's virtual environment and the Maven jars it resolved. Needs root (``ip netns``, ``mount``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

BRIDGE = "fgr0"
PREFIX = "10.77.0"
GATEWAY = f"{PREFIX}.1"
HOME = "/home/fgr"
"""Every host's $HOME: the same path, a different folder per host."""
NS_DIR = Path("/run/fg-rehearsal")
"""Where the mount and UTS namespaces are pinned (a private mount, so the pins do not propagate)."""


class HostError(RuntimeError):
    """A host could not be made, reached or taken down."""


def _sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise HostError(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr.strip()}")
    return result


@dataclass(frozen=True)
class Host:
    """One host: ``name`` (a letter), its address on the bridge and its folder on the real disk."""

    name: str
    index: int
    state: Path

    @property
    def address(self) -> str:
        return f"{PREFIX}.{10 + self.index}"

    @property
    def hostname(self) -> str:
        return f"host-{self.name}"

    @property
    def netns(self) -> str:
        return f"fgr-{self.name}"

    @property
    def folder(self) -> Path:
        """This host's disk (its /tmp and $HOME live under it); only the rehearsal's driver reads it."""
        return self.state / "hosts" / self.name

    @property
    def logs(self) -> Path:
        """Where the driver keeps the output of the processes it started on this host (not visible there)."""
        return self.state / "logs" / self.name

    def enter(self) -> list[str]:
        """The argv prefix that runs a command on this host."""
        return [
            "nsenter",
            f"--net=/run/netns/{self.netns}",
            f"--mount={NS_DIR / (self.netns + '.mnt')}",
            f"--uts={NS_DIR / (self.netns + '.uts')}",
            "--",
        ]

    def environment(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """A login-like environment on this host: its $HOME and hostname, the driver's PATH."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "HOME": HOME,
            "HOSTNAME": self.hostname,
            "TMPDIR": "/tmp",
            "LANG": "C.UTF-8",
            "SPARK_LOCAL_IP": self.address,
        }
        for key in ("JAVA_HOME", "JAVA_TOOL_OPTIONS"):
            if key in os.environ:
                env[key] = os.environ[key]
        env.update(extra or {})
        return env

    def run(
        self, argv: Sequence[str], env: Mapping[str, str] | None = None, timeout: float = 300, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` on this host to its end; HostError with its output if ``check`` and it failed."""
        result = subprocess.run(
            [*self.enter(), *argv],
            env=self.environment(env),  # not on the command line, where every host's ps would show it
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise HostError(
                f"on {self.hostname}: {' '.join(argv)} failed ({result.returncode}):\n{result.stdout[-3000:]}"
                f"\n{result.stderr[-3000:]}"
            )
        return result

    def spawn(self, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> int:
        """Start ``argv`` on this host in the background (its own session); output to ``logs/NAME.log``."""
        self.logs.mkdir(parents=True, exist_ok=True)
        with open(self.logs / f"{name}.log", "ab") as log:
            process = subprocess.Popen(
                [*self.enter(), *argv],
                env=self.environment(env),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        (self.logs / f"{name}.pid").write_text(str(process.pid))
        return process.pid

    def pids(self) -> list[int]:
        """Every process living in this host's network namespace."""
        result = _sh("ip", "netns", "pids", self.netns, check=False)
        return [int(p) for p in result.stdout.split()]

    def cut(self) -> None:
        """Unplug this host's cable: it keeps running but reaches nobody and nobody reaches it."""
        _sh("ip", "link", "set", f"{self.netns}-br", "down")

    def plug(self) -> None:
        """Plug the cable back in."""
        _sh("ip", "link", "set", f"{self.netns}-br", "up")


def hosts(state: Path, names: str = "abcdef") -> list[Host]:
    return [Host(name, index + 1, state) for index, name in enumerate(names)]


def _pin_namespaces_folder() -> None:
    NS_DIR.mkdir(parents=True, exist_ok=True)
    mounts = Path("/proc/self/mounts").read_text()
    if f" {NS_DIR} " not in mounts:
        _sh("mount", "--bind", str(NS_DIR), str(NS_DIR))
        _sh("mount", "--make-private", str(NS_DIR))


def _software_mounts() -> list[tuple[str, str]]:
    """Read-only binds of what each host has installed besides the system: what Maven resolved."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "airflow-provider-finegrained"
    # maven: the S3A jars; hadoop: the Hadoop minicluster's classpath (its jars stay in ~/.m2, seen by every host)
    return [
        (str(cache / kind), f"{HOME}/.cache/airflow-provider-finegrained/{kind}")
        for kind in ("maven", "hadoop")
        if (cache / kind).is_dir()
    ]


def _installed_under_tmp() -> list[str]:
    """The checkout (with its .venv) and the interpreter's prefixes, where they lie under the machine's /tmp."""
    repo = Path(__file__).resolve().parent.parent
    found: list[str] = []
    for path in (str(repo), sys.prefix, sys.base_prefix):
        real = os.path.realpath(path)
        if real.startswith("/tmp/") and not any(real == f or real.startswith(f + "/") for f in found):
            found.append(real)
    return found


def up(all_hosts: Sequence[Host]) -> None:
    """Make the bridge and every host; each host's folder starts empty."""
    state = all_hosts[0].state
    down(all_hosts)  # what a rehearsal that died left behind
    for folder in (state / "hosts", state / "logs"):
        shutil.rmtree(folder, ignore_errors=True)
    _pin_namespaces_folder()
    Path(HOME).mkdir(parents=True, exist_ok=True)
    if _sh("ip", "link", "show", BRIDGE, check=False).returncode != 0:
        _sh("ip", "link", "add", BRIDGE, "type", "bridge")
        _sh("ip", "addr", "add", f"{GATEWAY}/24", "dev", BRIDGE)
    _sh("ip", "link", "set", BRIDGE, "up")
    etc_hosts = state / "etc-hosts"
    lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost"]
    lines += [f"{host.address} {host.hostname}" for host in all_hosts]
    etc_hosts.write_text("\n".join(lines) + "\n")
    for host in all_hosts:
        _make(host, etc_hosts)
    (state / "hosts.json").write_text(
        json.dumps({host.name: {"address": host.address, "hostname": host.hostname} for host in all_hosts}, indent=1)
    )


def _make(host: Host, etc_hosts: Path) -> None:
    for sub in ("tmp", "home"):
        (host.folder / sub).mkdir(parents=True, exist_ok=True)
    (host.folder / "tmp").chmod(0o1777)
    host.logs.mkdir(parents=True, exist_ok=True)
    _sh("ip", "netns", "add", host.netns)
    peer = f"{host.netns}-br"
    _sh("ip", "link", "add", peer, "type", "veth", "peer", "name", "eth0", "netns", host.netns)
    _sh("ip", "link", "set", peer, "master", BRIDGE)
    _sh("ip", "link", "set", peer, "up")
    inside = ["ip", "netns", "exec", host.netns]
    _sh(*inside, "ip", "addr", "add", f"{host.address}/24", "dev", "eth0")
    _sh(*inside, "ip", "link", "set", "eth0", "up")
    _sh(*inside, "ip", "link", "set", "lo", "up")
    _sh(*inside, "ip", "route", "add", "default", "via", GATEWAY)
    script = [
        f"hostname {host.hostname}",
        f"mount --bind {etc_hosts} /etc/hosts",
        f"mount --bind {host.folder / 'home'} {HOME}",
    ]
    for source, target in _software_mounts():
        script.append(f"mkdir -p {target} && mount --bind {source} {target} && mount -o remount,bind,ro {target}")
    # Software under the machine's /tmp (a checkout and its .venv there, as in CI) is installed on every host:
    # parked in $HOME while the host's own /tmp goes over the machine's, then moved back to its path.
    software = _installed_under_tmp()
    for index, path in enumerate(software):
        script.append(f"mkdir -p {HOME}/.software-{index} && mount --bind {path} {HOME}/.software-{index}")
    # /tmp after the binds from it: the state folder may itself be under the machine's /tmp.
    script.append(f"mount --bind {host.folder / 'tmp'} /tmp")
    for index, path in enumerate(software):
        script.append(f"mkdir -p {path} && mount --move {HOME}/.software-{index} {path}")
    for kind in ("mnt", "uts"):
        (NS_DIR / f"{host.netns}.{kind}").touch()
    _sh(
        "unshare",
        f"--mount={NS_DIR / (host.netns + '.mnt')}",
        f"--uts={NS_DIR / (host.netns + '.uts')}",
        "--propagation",
        "private",
        "sh",
        "-ec",
        " && ".join(script),
    )


def stop_processes(some: Sequence[Host], grace: float = 10.0) -> None:
    """SIGTERM every process on the hosts at once, SIGKILL what is left after ``grace`` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for pid in (pid for host in some for pid in host.pids()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while any(host.pids() for host in some) and time.monotonic() < deadline:
            time.sleep(0.2)
    left = {host.hostname: host.pids() for host in some if host.pids()}
    if left:
        raise HostError(f"processes survived SIGKILL: {left}")


def down(all_hosts: Sequence[Host]) -> None:
    """Stop every process on every host, remove the namespaces and the bridge; nothing is left."""
    existing = set(_sh("ip", "netns", "list", check=False).stdout.split())
    stop_processes([host for host in all_hosts if host.netns in existing])
    for host in all_hosts:
        if host.netns in existing:
            _sh("ip", "netns", "del", host.netns)
        _sh("ip", "link", "del", f"{host.netns}-br", check=False)
        for kind in ("mnt", "uts"):
            pin = NS_DIR / f"{host.netns}.{kind}"
            if pin.exists():
                _sh("umount", str(pin), check=False)
                pin.unlink()
    _sh("ip", "link", "del", BRIDGE, check=False)


def leftovers() -> list[str]:
    """What a rehearsal left behind on this machine: namespaces, links and pins (empty after ``down``)."""
    found = [name for name in _sh("ip", "netns", "list", check=False).stdout.split() if name.startswith("fgr-")]
    links = _sh("ip", "-o", "link", "show", check=False).stdout
    found += [line.split(":")[1].strip().split("@")[0] for line in links.splitlines() if "fgr" in line]
    if NS_DIR.is_dir():
        found += [str(p) for p in NS_DIR.iterdir()]
    return found
