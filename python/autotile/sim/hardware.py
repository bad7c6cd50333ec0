"""Hardware profiles: devices, their compute and memory figures, and the interconnect as a
hierarchy of switches, read from plain JSON files (``profiles/*.json``) a user can edit or
add to (``load_profile("path/to/my.json")``).

Interconnect model. ``levels`` lists the hierarchy innermost first. Level i groups ``group``
children (devices at level 0, groups of the level below otherwise) under one switch; every
child has its own link to that switch with ``bandwidth`` bytes/s *each way* (full duplex) and
``latency`` seconds. A transfer from device a to device b climbs from a to the lowest level
whose group holds both and descends to b, using one up-link and one down-link per level
crossed, so traffic that leaves a group shares the group's uplink.

Swaps to host memory (exec/swap_plan.h) take the host path: ``"host_levels": "levels"`` when
host memory sits at the root of the same tree (a PCIe machine: swaps share its switch uplinks
with each other and with peer traffic), a list of levels of the same form when the host path
is a tree of its own (a DGX's PCIe switches beside its NVSwitch fabric), absent to give every
device a private link of ``device.host_bandwidth``. A level with
``"shared": true`` is one medium for every transfer crossing it (the host's memory bus:
copies in either direction compete). ``group: null`` means "all the rest" (any k)."""
from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ..errors import Error

PROFILE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "profiles")

#: A link resource: (level, index of the child group at that level, direction "up"/"down"/"bus")
LinkId = Tuple[int, int, str]


@dataclass
class Level:
    name: str
    group: Optional[int]
    bandwidth: float
    latency: float
    shared: bool = False


@dataclass
class Hardware:
    """A hardware profile: per-device figures, efficiency per op kind and the link hierarchy."""

    name: str
    description: str
    devices: Optional[int]  # None: any number (virtual devices)
    device: Dict[str, float]
    efficiency: Dict[str, float]
    levels: List[Level]
    #: per op kind (or "default"): the FLOPs of a tile at which a kernel reaches half its
    #: large-tile efficiency (``efficiency_half_flops``; see :func:`cost_table.efficiency`)
    half_flops: Dict[str, float] = field(default_factory=dict)
    cores: Optional[int] = None  # set when all devices share this many CPU cores (host)
    sources: List[str] = field(default_factory=list)
    path: Optional[str] = None
    #: the path to host memory: None (a private link per device), "levels" (the root of
    #: `levels`) or its own levels (innermost first); see the module docstring
    host_levels: object = None

    # ------------------------------------------------------------------ device figures
    @property
    def peak_flops(self) -> float:
        return float(self.device["peak_flops"])

    @property
    def mem_bandwidth(self) -> float:
        return float(self.device["mem_bandwidth"])

    @property
    def memory_bytes(self) -> float:
        return float(self.device["memory_bytes"])

    @property
    def launch_overhead(self) -> float:
        return float(self.device.get("launch_overhead_s", 0.0))

    @property
    def copy_engines(self) -> int:
        """Copy engines per device; 0 means fetches run on the compute stream (host threads)."""
        return int(self.device.get("copy_engines", 1))

    @property
    def fetch_on_cores(self) -> bool:
        """Whether a fetch is a copy run by the device's own CPU thread (the host runtime's
        MultiFetch): it then takes a core like a kernel, rather than a link's bandwidth."""
        return bool(self.device.get("fetch_on_cores", False))

    @property
    def wake_latency(self) -> float:
        """Seconds an in-order device thread that blocked on a dependency takes to resume."""
        return float(self.device.get("wake_latency_s", 0.0))

    @property
    def step_overhead(self) -> float:
        """Seconds the runtime spends per step before its first op can start (host runtime:
        BLAS thread limits, starting the worker threads, counting dependencies)."""
        return float(self.device.get("step_overhead_s", 0.0))

    @property
    def op_overhead(self) -> float:
        """Seconds the runtime spends per op outside the op itself (host runtime: the ready
        queue, its lock, handing the op to a worker thread); Python, so under :attr:`gil`."""
        return float(self.device.get("op_overhead_s", 0.0))

    @property
    def dispatch_compute(self) -> float:
        """Seconds of a compute op's own time that are Python dispatch (tile attributes,
        kernel context, views: a tiny op's whole time), run before its kernel, under :attr:`gil`."""
        return float(self.device.get("dispatch_compute_s", 0.0))

    @property
    def dispatch_fetch(self) -> float:
        """As :attr:`dispatch_compute`, for a fetch (a tiny MultiFetch's whole time)."""
        return float(self.device.get("dispatch_fetch_s", 0.0))

    @property
    def gil(self) -> bool:
        """Whether the devices' threads share one interpreter lock (the host runtime): an op's
        dispatch and per-op overhead then run one at a time across all devices."""
        return bool(self.device.get("gil", False))

    @property
    def in_order(self) -> bool:
        """Whether each device runs its schedule strictly in order (host runtime threads)."""
        return bool(self.device.get("in_order", False))

    @property
    def host_bandwidth(self) -> float:
        """Bytes/s of one device's link to host memory (swap-outs and swap-ins): the profile's
        ``host_bandwidth``, else the slowest level of its hierarchy (the PCIe root on a
        PCIe machine), else the local copy bandwidth (the host runtime)."""
        if "host_bandwidth" in self.device:
            return float(self.device["host_bandwidth"])
        if self.levels:
            return float(min(lv.bandwidth for lv in self.levels))
        return self.local_copy_bandwidth

    @property
    def local_copy_bandwidth(self) -> float:
        return float(self.device.get("local_copy_bandwidth", self.mem_bandwidth / 2))

    def check_devices(self, k: int) -> None:
        """Error unless `k` devices fit this profile."""
        if self.devices is not None and k > self.devices:
            raise Error(f"profile '{self.name}' has {self.devices} devices, cannot simulate {k}")

    # ------------------------------------------------------------------ interconnect
    def _group_sizes(self, k: int) -> List[int]:
        """Devices under one switch at each level (cumulative products of `group`)."""
        sizes, n = [], 1
        for lv in self.levels:
            n = n * lv.group if lv.group else max(k, n)
            sizes.append(n)
        return sizes

    def route(self, src: int, dst: int, k: int) -> List[Tuple[LinkId, float, float]]:
        """Links (id, bandwidth each way, latency) a transfer from device src to dst crosses."""
        if src == dst:
            return []
        sizes = self._group_sizes(k)
        below = 1  # devices per child at the current level
        links = []
        for i, (lv, size) in enumerate(zip(self.levels, sizes)):
            if lv.shared:
                links.append(((i, src // size, "bus"), lv.bandwidth, lv.latency))
            else:
                links.append(((i, src // below, "up"), lv.bandwidth, lv.latency))
                links.append(((i, dst // below, "down"), lv.bandwidth, lv.latency))
            if src // size == dst // size:
                return links
            below = size
        raise Error(f"profile '{self.name}': devices {src} and {dst} share no switch (levels cover "
                    f"{sizes[-1] if sizes else 1} devices)")

    def host_route(self, device: int, k: int, to_host: bool) -> Optional[List[Tuple[LinkId, float, float]]]:
        """Links (id, bandwidth each way, latency) a swap of `device` crosses to host memory
        (`to_host`) or back, or None when the profile gives each device a private host link
        (``host_bandwidth``). Host-path links of their own tree have negative level ids, so
        they never meet the device tree's."""
        if self.host_levels is None:
            return None
        tree = self.levels if self.host_levels == "levels" else self.host_levels
        own = self.host_levels != "levels"
        way = "up" if to_host else "down"
        links, below, n = [], 1, 1
        for i, lv in enumerate(tree):
            n = n * lv.group if lv.group else max(k, n)
            lid = -1 - i if own else i
            links.append(((lid, device // n, "bus") if lv.shared else (lid, device // below, way), lv.bandwidth,
                          lv.latency))
            below = n
        return links

    def latency(self, src: int, dst: int, k: int) -> float:
        """Start-up latency of a transfer: the sum over the switch levels it climbs."""
        seen, total = set(), 0.0
        for (lvl, _, _), _, lat in self.route(src, dst, k):
            if lvl not in seen:
                seen.add(lvl)
                total += lat
        return total

    def cut_bandwidths(self, factors: List[int]) -> List[float]:
        """Per-cut bandwidths for the planner (slowest first): a cut that splits the devices
        across a level's switch is priced at that level's link bandwidth."""
        k = 1
        for f in factors:
            k *= f
        sizes = self._group_sizes(k)
        result, span = [], k
        for f in factors:
            span //= f  # devices per part after this cut
            # the cut separates groups of `span * f` devices into `f` parts of `span`: the
            # slowest level any pair crosses is the lowest level holding span * f devices
            lv = next((i for i, s in enumerate(sizes) if s >= span * f), len(sizes) - 1)
            result.append(self.levels[lv].bandwidth if self.levels else 1.0)
        return result

    def check_fits(self, k: int) -> None:
        """Error naming the field unless `k` devices fit this profile's levels: at most
        ``devices``, and within what the levels group (a level of fixed groups that is the
        outermost cannot hold more devices than its groups do)."""
        if self.devices is not None and k > self.devices:
            raise Error(f"profile '{self.name}': devices is {self.devices}, cannot plan for {k} devices")
        sizes = self._group_sizes(k)
        if sizes and sizes[-1] < k:
            raise Error(f"profile '{self.name}': its {len(self.levels)} level(s) group at most {sizes[-1]} devices "
                        f"(levels[{len(self.levels) - 1}].group = {self.levels[-1].group}), cannot hold {k}")

    def cut_levels(self, factors: List[int]) -> List[int]:
        """The level each cut crosses, in cut order. Device ids are the cuts' digits, the first
        cut most significant (csrc/search/cost_model.h), and a node holds consecutive ids, so
        the first cuts separate the outermost groups: cut i splits groups of ``span * f_i``
        devices into f_i parts and crosses the lowest level whose groups hold ``span * f_i``."""
        k = 1
        for f in factors:
            k *= f
        self.check_fits(k)
        sizes = self._group_sizes(k)
        result, span = [], k
        for f in factors:
            span //= f
            result.append(next((i for i, s in enumerate(sizes) if s >= span * f), len(sizes) - 1))
        return result

    def device_bandwidth(self, level: int, k: int) -> float:
        """Bytes/s each way one device gets at `level` when every device sends across it at
        once: the level's link bandwidth shared by the devices below one child link (all the
        group's devices for a ``shared`` medium)."""
        sizes = self._group_sizes(k)
        lv = self.levels[level]
        below = min(k, sizes[level]) if lv.shared else (sizes[level - 1] if level > 0 else 1)
        return lv.bandwidth / max(1, below)

    def level_latency(self, level: int) -> float:
        """Start-up latency of a transfer that climbs to `level` (the sum of the levels' latencies)."""
        return float(sum(lv.latency for lv in self.levels[:level + 1]))

    def to_dict(self) -> dict:
        return {"name": self.name, "description": self.description, "devices": self.devices,
                "cores": self.cores, "device": dict(self.device), "efficiency": dict(self.efficiency),
                "efficiency_half_flops": dict(self.half_flops), "levels": [vars(lv).copy() for lv in self.levels],
                "sources": list(self.sources),
                **({} if self.host_levels is None else {"host_levels": self.host_levels if self.host_levels == "levels"
                                                        else [vars(lv).copy() for lv in self.host_levels]})}


#: figures of ``device`` that must be numbers > 0 when given (the first three always)
_POSITIVE_DEVICE = ("peak_flops", "mem_bandwidth", "memory_bytes", "local_copy_bandwidth", "host_bandwidth")
#: figures of ``device`` that must be numbers >= 0 when given
_NON_NEGATIVE_DEVICE = ("launch_overhead_s", "copy_engines", "wake_latency_s", "step_overhead_s", "op_overhead_s",
                        "dispatch_compute_s", "dispatch_fetch_s", "fetch_overhead_s", "blas_threads")
#: the fields a level may have
_LEVEL_FIELDS = ("name", "group", "bandwidth", "latency", "shared")


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and abs(value) != float("inf")


def _parse(doc: dict, path: Optional[str]) -> Hardware:
    where = path or "profile"
    if not isinstance(doc, dict):
        raise Error(f"{where}: a hardware profile is a JSON object, got {type(doc).__name__}")
    for key in ("name", "device", "levels"):
        if key not in doc:
            raise Error(f"{where}: hardware profile has no '{key}'")
    if not isinstance(doc["device"], dict):
        raise Error(f"{where}: device must be an object of figures")
    for key in _POSITIVE_DEVICE:
        if (key in _POSITIVE_DEVICE[:3] or key in doc["device"]) and (
                not _number(doc["device"].get(key)) or doc["device"][key] <= 0):
            raise Error(f"{where}: device.{key} must be a positive number"
                        f"{'' if key in doc['device'] else ' (missing)'}, got {doc['device'].get(key)!r}")
    for key in _NON_NEGATIVE_DEVICE:
        if key in doc["device"] and (not _number(doc["device"][key]) or doc["device"][key] < 0):
            raise Error(f"{where}: device.{key} must be a number >= 0, got {doc['device'][key]!r}")
    eff = doc.get("efficiency", {})
    if not isinstance(eff, dict):
        raise Error(f"{where}: efficiency must map op kinds to fractions of peak")
    for kind, v in eff.items():
        if not _number(v) or v <= 0:
            raise Error(f"{where}: efficiency.{kind} must be a positive number, got {v!r}")
    if not isinstance(doc["levels"], list) or not doc["levels"]:
        raise Error(f"{where}: levels must be a non-empty list of link levels (innermost first)")
    levels = _parse_levels(doc["levels"], where, "levels")
    host_levels = doc.get("host_levels")
    if host_levels is not None and host_levels != "levels":
        if not isinstance(host_levels, list) or not host_levels:
            raise Error(f"{where}: host_levels must be \"levels\" or a non-empty list of levels")
        host_levels = _parse_levels(host_levels, where, "host_levels")
    half = doc.get("efficiency_half_flops", {})
    if not isinstance(half, dict) or any(not _number(v) or v < 0 for v in half.values()):
        raise Error(f"{where}: efficiency_half_flops must map op kinds to FLOPs >= 0")
    devices = doc.get("devices")
    if devices is not None and (not isinstance(devices, int) or isinstance(devices, bool) or devices < 1):
        raise Error(f"{where}: devices must be a positive integer or null (any number), got {devices!r}")
    hw = Hardware(name=doc["name"], description=doc.get("description", ""), devices=devices,
                  device=dict(doc["device"]), efficiency=dict(eff), levels=levels,
                  half_flops={str(k): float(v) for k, v in half.items()}, cores=doc.get("cores"),
                  sources=list(doc.get("sources", [])), path=path, host_levels=host_levels)
    if devices is not None:
        sizes = hw._group_sizes(devices)
        if sizes and sizes[-1] < devices:
            raise Error(f"{where}: levels group {sizes[-1]} devices, the profile says {devices}")
    return hw


def _parse_levels(docs, where: str, key: str) -> List[Level]:
    levels = []
    for i, lv in enumerate(docs):
        field = f"{key}[{i}]"
        if not isinstance(lv, dict):
            raise Error(f"{where}: {field} must be an object with a 'bandwidth' (and group, latency, name)")
        for name in lv:
            if name not in _LEVEL_FIELDS and not str(name).endswith("_comment"):
                raise Error(f"{where}: {field}.{name}: unknown level field (a level has {', '.join(_LEVEL_FIELDS)})")
        if "bandwidth" not in lv:
            raise Error(f"{where}: {field}.bandwidth is missing (bytes/s each way per child link)")
        if not _number(lv["bandwidth"]) or lv["bandwidth"] <= 0:
            raise Error(f"{where}: {field}.bandwidth must be a positive number, got {lv['bandwidth']!r}")
        if "latency" in lv and (not _number(lv["latency"]) or lv["latency"] < 0):
            raise Error(f"{where}: {field}.latency must be a number >= 0 (seconds), got {lv['latency']!r}")
        group = lv.get("group")
        if group is not None and (not isinstance(group, int) or isinstance(group, bool) or group < 1):
            raise Error(f"{where}: {field}.group must be a positive integer or null (all the rest), got {group!r}")
        if group is None and i != len(docs) - 1:
            raise Error(f"{where}: {field}.group is null (all the rest) but levels follow it: only the outermost "
                        f"level may be null")
        levels.append(Level(name=str(lv.get("name", f"level{i}")), group=group, bandwidth=float(lv["bandwidth"]),
                            latency=float(lv.get("latency", 0.0)), shared=bool(lv.get("shared", False))))
    return levels


def available_profiles() -> List[str]:
    """Names of the profiles shipped in ``autotile/sim/profiles``."""
    return sorted(os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(PROFILE_DIR, "*.json")))


def load_profile(name_or_path: str) -> Hardware:
    """A profile by name (``p2.8xlarge``, ``dgx-a100``, ``2x8-ib``, ``host``) or JSON path."""
    if isinstance(name_or_path, Hardware):
        return name_or_path
    path = name_or_path if name_or_path.endswith(".json") or os.sep in name_or_path else \
        os.path.join(PROFILE_DIR, name_or_path + ".json")
    if not os.path.exists(path):
        raise Error(f"unknown hardware profile '{name_or_path}' (shipped: {', '.join(available_profiles())})")
    from ..file_read import read_regular_file

    text = read_regular_file(path, "hardware profile")  # a FIFO named *.json would block open()
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise Error(f"{path}: not valid JSON: {e or 'nested too deeply'}") from None
    return _parse(doc, path)


def profile_from_dict(doc: dict) -> Hardware:
    """A profile from a dict of the JSON form (tests, programmatic profiles)."""
    return _parse(doc, None)
