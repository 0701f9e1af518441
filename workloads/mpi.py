"""mpi: mpi4py ping-pong (ranks 0 and 1) and allreduce (all ranks) latency/bandwidth over a
list of message sizes, plus which MPI library and which transport actually carried the
traffic: MPI_Get_library_version, the MPI and fabric libraries and Open MPI MCA components
mapped into the process (/proc/self/maps), shared-memory segments, TCP connections to peers,
and the relevant environment. The "transport" field lets a suite notice a container MPI that
silently fell back to TCP."""

import array
import os
import re
import socket
import time

from workloads import common

NAME = "mpi"
DEFAULT_SIZES = "1,8,64,512,4k,32k,256k,1M,4M"
LIB_PATTERN = re.compile(r"/(lib(?:mpi|mpich|fabric|ucp|uct|ucs|psm2|psm3|psm_infinipath|cxi|"
                         r"ibverbs|rdmacm|mlx5|efa|hcoll|xpmem|knem|pmix|pmi|pals)[^/]*\.so[^/]*)$")
MCA_PATTERN = re.compile(r"/mca_([a-z0-9]+)_([a-z0-9_]+)\.so$")
FI_PROVIDER_LIB = re.compile(r"/lib([a-z0-9_]+)-fi\.so")
SHM_PATTERN = re.compile(r"/dev/shm/(vader_segment|sm_segment|psm2_shm|psm3_shm|ucx|"
                         r"mpich|cray_shm|shm-col-space|ompi\.)[^ ]*")
ENV_PATTERN = re.compile(r"^(FI_PROVIDER|FI_CXI_.*|FI_TCP_IFACE|OMPI_MCA_.*|I_MPI_FABRICS|"
                         r"I_MPI_OFI_PROVIDER|I_MPI_SHM|UCX_TLS|UCX_NET_DEVICES|MPICH_OFI_.*|"
                         r"MPIR_CVAR_CH4_NETMOD|MPIR_CVAR_NOLOCAL|MPIR_CVAR_OFI_USE_PROVIDER|"
                         r"PSM2_DEVICES|PSM3_DEVICES)$")
ENV_EXCLUDE = ("OMPI_MCA_orte", "OMPI_MCA_ess", "OMPI_MCA_pmix", "OMPI_MCA_initial_wdir",
               "OMPI_MCA_mpi_oversubscribe", "OMPI_MCA_shmem_RUNTIME_QUERY_hint",
               "OMPI_MCA_rmaps", "OMPI_MCA_plm", "OMPI_MCA_ras")  # launcher internals


def parse_sizes(text):
    """'1,8,4k,1M' -> [1, 8, 4096, 1048576] (k/K = 1024, m/M = 1024^2)."""
    sizes = []
    for item in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*([kKmM]?)\s*", item)
        if not m or int(m.group(1)) < 1:
            raise common.UsageError(f"--sizes: bad size {item.strip()!r} (positive integers, "
                                    "optionally with k or M)")
        sizes.append(int(m.group(1)) * {"": 1, "k": 1024, "m": 1024 ** 2}[m.group(2).lower()])
    return sizes


# ---------------------------------------------------------------- evidence

def mapped_files(maps_path="/proc/self/maps"):
    files = set()
    try:
        with open(maps_path) as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6:
                    files.add(parts[5].strip())
    except OSError:
        pass
    return files


def _hex_addr_is_loopback(hexaddr):
    ip = hexaddr.split(":")[0]
    if len(ip) == 8:                                   # IPv4, little-endian
        return int(ip[6:8], 16) == 127
    words = [ip[i:i + 8] for i in range(0, 32, 8)]     # IPv6, four little-endian words
    raw = b"".join(bytes.fromhex(w)[::-1] for w in words)
    return raw == b"\0" * 15 + b"\1" or (raw[:12] == b"\0" * 10 + b"\xff\xff" and raw[12] == 127)


def tcp_peer_connections():
    """Established TCP connections of this process to non-loopback addresses."""
    inodes = set()
    try:
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        return 0
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.readlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 9 and cols[9] in inodes and cols[3] == "01" \
                    and not _hex_addr_is_loopback(cols[2]):
                count += 1
    return count


# The MPI library itself: libmpi (Open MPI, MPICH-ABI), libmpich, libmpi_abi (MPI 5.0 standard ABI), Cray MPICH's
# compiler-named ones (libmpi_gnu_123, libmpi_cray, ...); not the language bindings (libmpifort, libmpi_cxx)
MPI_LIBRARY = re.compile(r"/lib(?:mpi|mpich|mpi_abi|mpi_intel|mpi_(?:gnu|cray|intel|amd|aocc|nvidia)[a-z0-9_]*)"
                         r"\.so(?:\.[0-9.]+)?$")


def mpi_library_paths(files):
    """The MPI libraries mapped into this process, as full paths (what /proc/self/maps names: the file itself,
    symlinks resolved), e.g. the host's /opt/cray/pe/mpich/8.1.31/ofi/gnu/9.1/lib/libmpi.so.12.0.0 in bind mode."""
    return sorted(f for f in files if MPI_LIBRARY.search(f))


def pmi_in_use(env):
    """How the launcher talks to this rank: PMIx (PMIX_RANK), PMI-1/PMI-2 over a socket the launcher handed
    over (PMI_FD: Hydra, srun --mpi=pmi2) or one it listens on (PMI_PORT: Hydra -pmi-port), else none seen."""
    if env.get("PMIX_RANK"):
        return "pmix"
    if env.get("PMI_FD"):
        return "pmi-fd"
    if env.get("PMI_PORT"):
        return "pmi-port"
    return "none"


def local_evidence(environ=None):
    env = os.environ if environ is None else environ
    files = mapped_files()
    libs = sorted({m.group(1) for f in files for m in [LIB_PATTERN.search(f)] if m})
    mca = sorted({f"{m.group(1)}_{m.group(2)}" for f in files for m in [MCA_PATTERN.search(f)] if m})
    providers = sorted({m.group(1) for f in files for m in [FI_PROVIDER_LIB.search(f)] if m})
    shm = sorted({m.group(0) for f in files for m in [SHM_PATTERN.search(f)] if m})
    return {
        "host": socket.gethostname(),
        "node": env.get("SLURMD_NODENAME") or socket.gethostname(),   # the scheduler's node (the test cluster's
        "libraries": libs,                                             # two nodes are one host)
        "mpi_library_paths": mpi_library_paths(files),
        "pmi": pmi_in_use(env),
        "mca_components": mca,
        "fabric_provider_libs": providers,
        "shm_segments": len(shm),
        "shm_segment_kinds": sorted({SHM_PATTERN.search(s).group(1) for s in shm}),
        "tcp_peer_connections": tcp_peer_connections(),
        "env": {k: v for k, v in sorted(env.items())
                if ENV_PATTERN.match(k) and not k.startswith(ENV_EXCLUDE)},
    }


def ofi_provider(ev):
    env = ev["env"]
    for var in ("FI_PROVIDER", "I_MPI_OFI_PROVIDER", "MPIR_CVAR_OFI_USE_PROVIDER"):
        if env.get(var):
            return env[var].split(",")[0].split(";")[0].lstrip("^") or "unknown", var
    for lib, prov in (("libcxi", "cxi"), ("libpsm2", "psm2"), ("libpsm3", "psm3"),
                      ("libefa", "efa"), ("libibverbs", "verbs")):
        if any(name.startswith(lib + ".so") for name in ev["libraries"]):   # the device's library, not a plugin
            return prov, f"{lib} loaded"
    if len(ev["fabric_provider_libs"]) == 1:
        return ev["fabric_provider_libs"][0], "provider plugin loaded"
    if ev["fabric_provider_libs"]:      # libfabric opens every plugin it finds: being loaded says nothing
        if ev["tcp_peer_connections"]:
            return "tcp", f"{ev['tcp_peer_connections']} TCP connection(s) to peers"
        return "unknown", f"{len(ev['fabric_provider_libs'])} provider plugins loaded, none named"
    if ev["tcp_peer_connections"]:
        return "tcp", f"{ev['tcp_peer_connections']} TCP connection(s) to peers"
    return "unknown", "no provider evidence"


def classify(library_version, ev, same_node, world_size):
    """-> (transport between ranks 0 and 1, network transport for inter-node traffic, reason).
    ev: evidence merged over ranks."""
    comps = set(ev["mca_components"])
    libs = " ".join(ev["libraries"])
    env = ev["env"]
    shm_used = ev["shm_segments"] > 0
    tcp_used = ev["tcp_peer_connections"] > 0
    if "Open MPI" in library_version:
        if "pml_ucx" in comps:
            net, why = "ucx", "pml_ucx loaded"
            return net, net, why + (f", UCX_TLS={env['UCX_TLS']}" if "UCX_TLS" in env else "")
        if "mtl_ofi" in comps:
            prov, src = ofi_provider(ev)
            return f"ofi:{prov}", f"ofi:{prov}", f"pml_cm + mtl_ofi loaded, provider from {src}"
        for comp, name in (("mtl_psm2", "psm2"), ("mtl_psm", "psm"), ("mtl_portals4", "portals4")):
            if comp in comps:
                return name, name, f"{comp} loaded"
        net = None
        for comp, name in (("btl_uct", "ucx"), ("btl_ofi", "ofi"), ("btl_openib", "ibverbs"),
                           ("btl_usnic", "usnic"), ("btl_tcp", "tcp")):
            if comp in comps:
                net = name if name != "ofi" else "ofi:" + ofi_provider(ev)[0]
                break
        if world_size == 1:
            return "self", net, "single rank"
        if same_node and shm_used:
            return "shm", net, f"pml_ob1, peer shared-memory segments mapped ({ev['shm_segment_kinds']})"
        if tcp_used:
            return "tcp", net, f"pml_ob1, {ev['tcp_peer_connections']} TCP connection(s) to peers"
        return net or "unknown", net, "pml_ob1, no shm segment or TCP connection seen"
    # MPICH family (MPICH, Cray MPICH, Intel MPI, MVAPICH) and others
    netmod = env.get("MPIR_CVAR_CH4_NETMOD", "").lower()
    no_local = env.get("MPIR_CVAR_NOLOCAL") == "1" or env.get("I_MPI_SHM", "").lower() in ("off", "0", "no") \
        or ("I_MPI_FABRICS" in env and "shm" not in env["I_MPI_FABRICS"])
    if no_local and tcp_used:
        net, why = "tcp", f"{ev['tcp_peer_connections']} TCP connection(s) to peers, shared memory off"
    elif "libucp" in libs and "libfabric" in libs and not netmod:     # MPICH built with both: which one carries
        net, why = "ucx|ofi", "libucp and libfabric loaded, MPIR_CVAR_CH4_NETMOD unset"   # it is MPICH's choice
    elif "libucp" in libs and (netmod == "ucx" or "libfabric" not in libs):
        net, why = "ucx", "libucp loaded" + (", MPIR_CVAR_CH4_NETMOD=ucx" if netmod else "")
    elif "libfabric" in libs:
        prov, src = ofi_provider(ev)
        net, why = f"ofi:{prov}", f"libfabric loaded, provider from {src}"
    elif "libpsm2" in libs:
        net, why = "psm2", "libpsm2 loaded"
    elif tcp_used:
        net, why = "tcp", "TCP connections to peers"
    else:
        net, why = None, "no network library loaded"
    if world_size == 1:
        return "self", net, why
    if same_node and not no_local:
        return "shm", net, why + "; ranks 0 and 1 share a node (intra-node shared memory)"
    return net or "unknown", net, why


# ---------------------------------------------------------------- benchmark

def pingpong(MPI, comm, size, iters, warmup):
    """One-way latency in seconds between ranks 0 and 1 (others wait)."""
    buf = bytearray(size)
    msg = [buf, MPI.BYTE]
    rank = comm.Get_rank()
    t0 = 0.0
    for i in range(warmup + iters):
        if i == warmup:
            t0 = MPI.Wtime()
        if rank == 0:
            comm.Send(msg, dest=1, tag=1)
            comm.Recv(msg, source=1, tag=2)
        elif rank == 1:
            comm.Recv(msg, source=0, tag=1)
            comm.Send(msg, dest=0, tag=2)
    elapsed = MPI.Wtime() - t0
    comm.Barrier()
    return elapsed / (2 * iters)


def allreduce(MPI, comm, size, iters, warmup):
    """Time per MPI_Allreduce (SUM of doubles, size bytes rounded to 8), max over ranks."""
    count = max(1, size // 8)
    send = array.array("d", [1.0]) * count
    recv = array.array("d", [0.0]) * count
    for _ in range(warmup):
        comm.Allreduce([send, MPI.DOUBLE], [recv, MPI.DOUBLE], op=MPI.SUM)
    comm.Barrier()
    t0 = MPI.Wtime()
    for _ in range(iters):
        comm.Allreduce([send, MPI.DOUBLE], [recv, MPI.DOUBLE], op=MPI.SUM)
    elapsed = (MPI.Wtime() - t0) / iters
    return comm.allreduce(elapsed, op=MPI.MAX)


def make_parser():
    p = common.parser(NAME, steps=100, warmup=10, serve=False)
    p.add_argument("--iters", dest="steps", type=common.positive_int, default=None,
                   help="iterations per size (same as --steps; default 100)")
    p.add_argument("--sizes", default=DEFAULT_SIZES,
                   help=f"message sizes in bytes, comma-separated, k/M suffixes (default {DEFAULT_SIZES})")
    p.add_argument("--bw-min", default="64k",
                   help="report bandwidth for sizes >= this (default 64k)")
    p.add_argument("--no-allreduce", action="store_true", help="skip the allreduce sweep")
    return p


def run(argv):
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.steps is None:
        args.steps = 100
    sizes = parse_sizes(args.sizes)
    bw_min = parse_sizes(args.bw_min)[0]
    if args.device == "cuda":
        raise common.UsageError("--device cuda: this benchmark moves host buffers only")
    try:
        from mpi4py import MPI
    except Exception as e:
        raise common.CannotRun(f"mpi4py is not importable ({type(e).__name__}: {e})") from None
    out = common.Output()
    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    hosts = comm.allgather(socket.gethostname())
    # ranks 0 and 1 on one node as the MPI sees it (its shared-memory group: the launcher's node layout), not
    # by host name: the test cluster's two nodes are one machine, and srun tells the MPI they are two
    shared = comm.Split_type(MPI.COMM_TYPE_SHARED)
    group = comm.allgather(min(shared.allgather(rank)))
    shared.Free()
    same_node = world > 1 and group[0] == group[1]
    startup = None
    latency, bandwidth, allred = None, None, {}
    t_start, cpu_start = time.perf_counter(), common.waited_s()
    if world > 1:
        latency, bandwidth = {}, {}
        for size in sizes:
            seconds = pingpong(MPI, comm, size, args.steps, args.warmup)
            if startup is None:
                startup = time.time() - common.PROCESS_START
            latency[str(size)] = seconds * 1e6
            if size >= bw_min:
                bandwidth[str(size)] = size / seconds / 1e6
    if not args.no_allreduce:
        for size in sizes:
            allred[str(size)] = allreduce(MPI, comm, size, args.steps, args.warmup) * 1e6
            if startup is None:
                startup = time.time() - common.PROCESS_START
    measured, cpu_end = time.perf_counter() - t_start, common.waited_s()
    # (seconds on a CPU, seconds waiting for one) of each rank's measuring thread: the suite's fitness check
    cpu = comm.gather(common.waited_between(cpu_start, cpu_end), root=0)
    evidence = comm.gather(local_evidence(), root=0)
    if rank != 0:
        return
    merged = dict(evidence[0])
    merged["mca_components"] = sorted({c for e in evidence for c in e["mca_components"]})
    merged["shm_segments"] = evidence[0]["shm_segments"]
    merged["tcp_peer_connections"] = evidence[0]["tcp_peer_connections"]
    merged["per_rank"] = [{"host": e["host"], "node": e["node"], "shm_segments": e["shm_segments"],
                           "tcp_peer_connections": e["tcp_peer_connections"],
                           "mpi_library_paths": e["mpi_library_paths"], "pmi": e["pmi"]} for e in evidence]
    library = MPI.Get_library_version().strip().strip("\0").strip()
    transport, network, reason = classify(library, merged, same_node, world)
    merged["reason"] = reason
    merged["same_node"] = same_node

    record = common.base_record(NAME, args, device="cpu", world_size=world, rank=rank)
    first = str(sizes[0])
    if latency:
        record.update({"metric": "latency", "value": latency[first]})
    elif allred:
        record.update({"metric": "allreduce_latency", "value": allred[first]})
    else:
        record.update({"metric": "latency", "value": None})
    vendor = MPI.get_vendor()
    record.update({
        "unit": "us", "higher_is_better": False, "startup_s": startup,
        "wall_s": time.time() - common.PROCESS_START, "measured_s": measured,
        "ran_s": None if None in cpu else sum(c[0] for c in cpu),
        "waited_s": None if None in cpu else sum(c[1] for c in cpu),
        "library_version": library,
        "mpi_library_paths": sorted({p for e in evidence for p in e["mpi_library_paths"]}),
        "pmi": sorted({e["pmi"] for e in evidence}), "mpi_vendor": f"{vendor[0]} {'.'.join(map(str, vendor[1]))}",
        "mpi4py": __import__("mpi4py").__version__,
        "transport": transport, "network": network, "evidence": merged,
        "sizes": sizes, "iters": args.steps, "hosts": sorted(set(hosts)),
        "latency_us": latency, "bandwidth_MBps": bandwidth, "allreduce_us": allred or None,
    })
    common.emit(record, out, args.json_out)


def main(argv=None):
    return common.main(NAME, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
