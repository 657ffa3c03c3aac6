#!/usr/bin/env bash
# An emulated cluster on one machine: N "nodes", each a network namespace with its own
# host name, joined by a bridge, with an optional rate limit on each node's link. MPI ranks
# on different nodes talk over TCP, as between real hosts; ranks on one node share memory.
#
#   scripts/cluster.sh up N [--rate RATE] [--name NAME] [--subnet A.B.C]
#   scripts/cluster.sh run [--name NAME] --mpi openmpi|mpich [--nodes K] [--ppn P]
#                          [--mpi-args "ARGS"] -- PROGRAM [ARGS...]
#   scripts/cluster.sh down [--name NAME]
#   scripts/cluster.sh status [--name NAME]
#   scripts/cluster.sh counters [--name NAME]
#
# up     makes the nodes NAME-n0 .. NAME-n<N-1> (addresses A.B.C.1 .. A.B.C.N on a bridge
#        with no address of its own; NAME is hpmlc, A.B.C is 10.213.0 unless given) and
#        shapes each node's link with a token bucket (tc tbf) when --rate is given
#        (e.g. 1gbit, 100mbit). Needs root and `ip netns`.
# run    launches PROGRAM on K nodes (all by default) with P ranks per node (1 by default)
#        through the MPI's own launcher: mpirun starts inside node 0 and reaches the other
#        nodes through a remote-shell agent that enters their namespaces. Between nodes
#        Open MPI uses its tcp transport (vader within a node) and MPICH's UCX its tcp
#        transport (MPICH's own shared memory within a node), on the nodes' eth0 only.
#        Exits with the program's status.
# down   ends every process left in the nodes and removes the namespaces, links and the
#        state folder /run/hpml-cluster/NAME. Safe to run twice.
# status prints the nodes and their addresses, or exits 1 when NAME is not up.
# counters prints, per node, the bytes its link has carried since `up`: "NODE SENT
#        RECEIVED" (the node's side of its veth pair, headers included).
#
# Traffic goes only between the addresses of the namespaces this script made: the bridge
# has no address, so nothing in a node can reach the host or any other network.
set -euo pipefail

me=$(readlink -f "$0")
name=hpmlc
subnet=10.213.0
rate=
statedir() { echo "/run/hpml-cluster/$name"; }
die() {
    echo "cluster: $*" >&2
    exit 2
}

check_name() {
    [[ $name =~ ^[a-z][a-z0-9]{0,7}$ ]] ||
        die "--name must be 1-8 lower-case letters or digits, starting with a letter (got '$name')"
}

need_root() {
    [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces): run as root"
    command -v ip >/dev/null || die "needs the 'ip' command (iproute2)"
    ip netns list >/dev/null 2>&1 || die "'ip netns' does not work here"
}

# The node names of a cluster that is up, one per line.
nodes() { cat "$(statedir)/nodes"; }

cmd_up() {
    local n=${1:-}
    shift || true
    while [ $# -gt 0 ]; do
        case "$1" in
        --rate) rate=${2:?--rate needs a value}; shift 2 ;;
        --name) name=${2:?--name needs a value}; shift 2 ;;
        --subnet) subnet=${2:?--subnet needs a value}; shift 2 ;;
        *) die "up: unknown option '$1'" ;;
        esac
    done
    [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 64 ] ||
        die "up: the node count must be 1 to 64 (got '${n}')"
    [[ $subnet =~ ^10\.[0-9]{1,3}\.[0-9]{1,3}$ ]] ||
        die "--subnet must be three parts of a 10.x.y.0/24 network, like 10.213.0 (got '$subnet')"
    [ -z "$rate" ] || [[ $rate =~ ^[0-9]+(k|m|g)?bit$ ]] ||
        die "--rate must be a rate like 1gbit, 500mbit or 100kbit (got '$rate')"
    check_name
    need_root
    local dir
    dir=$(statedir)
    [ ! -e "$dir" ] || die "a cluster named '$name' is up already (scripts/cluster.sh down --name $name)"
    if ip -o addr show | grep -q " inet $subnet\."; then
        die "the network $subnet.0/24 is in use on this machine: choose another --subnet"
    fi
    mkdir -p "$dir"
    # From here a failure removes what was made.
    trap 'cmd_down_quiet' ERR
    echo "$subnet" >"$dir/subnet"
    : >"$dir/nodes"
    printf '127.0.0.1\tlocalhost\n' >"$dir/hosts"
    ip link add "$name-br" type bridge
    ip link set "$name-br" up
    local i node
    for ((i = 0; i < n; i++)); do
        node=$name-n$i
        ip netns add "$node"
        echo "$node" >>"$dir/nodes"
        ip netns exec "$node" ip link set lo up
        ip link add "$name-v$i" type veth peer name eth0 netns "$node"
        ip link set "$name-v$i" master "$name-br" up
        ip netns exec "$node" ip addr add "$subnet.$((i + 1))/24" dev eth0
        ip netns exec "$node" ip link set eth0 up
        if [ -n "$rate" ]; then
            # Egress of each node: a transfer between two nodes crosses one shaped link.
            ip netns exec "$node" tc qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 100ms
        fi
        printf '%s\t%s\n' "$subnet.$((i + 1))" "$node" >>"$dir/hosts"
    done
    echo "${rate:-unshaped}" >"$dir/rate"
    # The remote-shell agent both launchers are given.
    printf '#!/bin/sh\nexec %q agent %q "$@"\n' "$me" "$name" >"$dir/rsh"
    chmod +x "$dir/rsh"
    trap - ERR
    echo "cluster $name: $n node(s), $subnet.1-$subnet.$n, links ${rate:-unshaped}"
}

cmd_down_quiet() {
    local dir node pids i
    dir=$(statedir)
    if [ -f "$dir/nodes" ]; then
        while read -r node; do
            pids=$(ip netns pids "$node" 2>/dev/null || true)
            [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
        done <"$dir/nodes"
    fi
    for node in $(ip netns list 2>/dev/null | awk '{print $1}'); do
        case "$node" in
        "$name"-n[0-9]*)
            pids=$(ip netns pids "$node" 2>/dev/null || true)
            [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
            ip netns del "$node" 2>/dev/null || true
            ;;
        esac
    done
    for i in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//'); do
        case "$i" in "$name"-v[0-9]* | "$name"-br) ip link del "$i" 2>/dev/null || true ;; esac
    done
    rm -rf "$dir"
}

# name_only VERB ARGS...: the options of a command that takes only --name.
name_only() {
    local verb=$1
    shift
    while [ $# -gt 0 ]; do
        case "$1" in
        --name) name=${2:?--name needs a value}; shift 2 ;;
        *) die "$verb: unknown option '$1'" ;;
        esac
    done
    check_name
}

cmd_down() {
    name_only down "$@"
    need_root
    cmd_down_quiet
    echo "cluster $name: down"
}

cmd_status() {
    name_only status "$@"
    local dir
    dir=$(statedir)
    [ -f "$dir/nodes" ] || { echo "cluster $name: not up" >&2; exit 1; }
    echo "cluster $name: links $(cat "$dir/rate")"
    sed 1d "$dir/hosts"
}

cmd_counters() {
    name_only counters "$@"
    local dir i=0 node st
    dir=$(statedir)
    [ -f "$dir/nodes" ] || { echo "cluster $name: not up" >&2; exit 1; }
    # The host's end of node i's link is $name-v<i>: what it receives the node sent.
    while read -r node; do
        st=/sys/class/net/$name-v$i/statistics
        [ -r "$st/rx_bytes" ] || die "counters: no link $name-v$i for node $node"
        echo "$node $(cat "$st/rx_bytes") $(cat "$st/tx_bytes")"
        i=$((i + 1))
    done <"$dir/nodes"
}

# in_node NODE COMMAND...: run COMMAND inside NODE as on its own host: its network
# namespace, a host name of its own, and /etc/hosts naming the cluster's nodes.
in_node() {
    local node=$1 dir
    shift
    dir=$(statedir)
    exec ip netns exec "$node" unshare --uts --mount sh -c \
        'mount --bind "$1" /etc/hosts && hostname "$2" && shift 2 && exec "$@"' \
        sh "$dir/hosts" "$node" "$@"
}

# The remote-shell agent: called by the launcher as `rsh [options] HOST COMMAND...`, runs
# COMMAND with sh inside HOST, as ssh would.
cmd_agent() {
    name=$1
    shift
    while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
    local host=${1:?agent: no host}
    shift
    grep -qx "$host" "$(statedir)/nodes" || {
        local n
        n=$(awk -v h="$host" '$1 == h {print $2}' "$(statedir)/hosts")
        [ -n "$n" ] || { echo "cluster agent: '$host' is not a node of cluster $name" >&2; exit 255; }
        host=$n
    }
    in_node "$host" sh -c "$*"
}

cmd_run() {
    local mpi= k= ppn=1 extra=
    while [ $# -gt 0 ]; do
        case "$1" in
        --name) name=${2:?--name needs a value}; shift 2 ;;
        --mpi) mpi=${2:?--mpi needs a value}; shift 2 ;;
        --nodes) k=${2:?--nodes needs a value}; shift 2 ;;
        --ppn) ppn=${2:?--ppn needs a value}; shift 2 ;;
        --mpi-args) extra=${2?--mpi-args needs a value}; shift 2 ;;
        --) shift; break ;;
        *) die "run: unknown option '$1' (the program comes after --)" ;;
        esac
    done
    check_name
    [ $# -ge 1 ] || die "run: no program (scripts/cluster.sh run --mpi openmpi -- PROGRAM ARGS)"
    local dir
    dir=$(statedir)
    [ -f "$dir/nodes" ] || die "cluster '$name' is not up (scripts/cluster.sh up N --name $name)"
    local all
    all=$(wc -l <"$dir/nodes")
    k=${k:-$all}
    [[ $k =~ ^[0-9]+$ ]] && [ "$k" -ge 1 ] && [ "$k" -le "$all" ] ||
        die "run: --nodes must be 1 to $all, the nodes of cluster $name (got '$k')"
    [[ $ppn =~ ^[0-9]+$ ]] && [ "$ppn" -ge 1 ] && [ "$ppn" -le 64 ] ||
        die "run: --ppn must be 1 to 64 (got '$ppn')"
    local np=$((k * ppn)) node0 hostlist= node
    node0=$(head -1 "$dir/nodes")
    local -a extra_args=()
    [ -z "$extra" ] || read -r -a extra_args <<<"$extra"
    case "$mpi" in
    openmpi)
        : >"$dir/hostfile"
        for node in $(head -n "$k" "$dir/nodes"); do
            echo "$node slots=$ppn" >>"$dir/hostfile"
        done
        in_node "$node0" mpirun.openmpi --allow-run-as-root --hostfile "$dir/hostfile" -np "$np" \
            --bind-to none --mca plm_rsh_agent "$dir/rsh" --mca plm_rsh_no_tree_spawn 1 \
            --mca btl tcp,vader,self --mca btl_tcp_if_include eth0 \
            --mca oob_tcp_if_include eth0 --mca pml ob1 --mca mpi_yield_when_idle 1 "${extra_args[@]}" "$@"
        ;;
    mpich)
        for node in $(head -n "$k" "$dir/nodes"); do
            hostlist+=${hostlist:+,}$node:$ppn
        done
        # UCX carries MPICH's traffic between nodes: over TCP on eth0 only, so it cannot
        # use its shared-memory transports between namespaces of one machine.
        export UCX_TLS=tcp,self UCX_NET_DEVICES=eth0
        in_node "$node0" mpirun.mpich -launcher ssh -launcher-exec "$dir/rsh" \
            -hosts "$hostlist" -np "$np" -iface eth0 "${extra_args[@]}" "$@"
        ;;
    "") die "run: --mpi openmpi|mpich is required" ;;
    *) die "run: --mpi must be openmpi or mpich (got '$mpi')" ;;
    esac
}

case "${1:-}" in
up) shift; cmd_up "$@" ;;
down) shift; cmd_down "$@" ;;
run) shift; cmd_run "$@" ;;
status) shift; cmd_status "$@" ;;
counters) shift; cmd_counters "$@" ;;
agent) shift; cmd_agent "$@" ;;
-h | --help) sed -n '2,30p' "$me" | sed 's/^# \{0,1\}//' ;;
*)
    echo "usage: scripts/cluster.sh up N [--rate RATE] | run --mpi MPI [--nodes K] [--ppn P] -- PROGRAM | down | status | counters   (--help)" >&2
    exit 2
    ;;
esac
