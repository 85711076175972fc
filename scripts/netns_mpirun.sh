#!/usr/bin/env bash
# Runs an MPI job across two "machines" on this one: two network namespaces (hosts node1 and
# node2, 10.77.0.1 and 10.77.0.2, joined by a veth pair), each process in its own namespace
# and hostname, talking over TCP only (OpenMPI's shared-memory transport is turned off).
# OpenMPI starts the remote side through its rsh launcher, pointed at `ip netns exec`.
# Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN), iproute2 and util-linux's unshare.
#
#   scripts/netns_mpirun.sh NP PROGRAM [ARGS...]
#
# Example: scripts/netns_mpirun.sh 2 target/release/examples/ddp_digits --epochs 3
set -euo pipefail
np="$1"; shift
tag="pyr$$"
dir="$(mktemp -d)"
cleanup() {
  ip netns del "${tag}a" 2>/dev/null || true
  ip netns del "${tag}b" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
ip netns add "${tag}a"
ip netns add "${tag}b"
ip link add "${tag}x" type veth peer name "${tag}y"
ip link set "${tag}x" netns "${tag}a"
ip link set "${tag}y" netns "${tag}b"
ip -n "${tag}a" addr add 10.77.0.1/24 dev "${tag}x"
ip -n "${tag}b" addr add 10.77.0.2/24 dev "${tag}y"
for ns in a b; do
  ip -n "${tag}$ns" link set lo up
done
ip -n "${tag}a" link set "${tag}x" up
ip -n "${tag}b" link set "${tag}y" up

slots=$(( (np + 1) / 2 ))
printf "10.77.0.1 slots=%d\n10.77.0.2 slots=%d\n" "$slots" "$slots" > "$dir/hosts"
cat > "$dir/rsh" <<AGENT
#!/usr/bin/env bash
# OpenMPI's plm_rsh_agent: "rsh HOST COMMAND..." runs COMMAND in HOST's namespace
host="\$1"; shift
case "\$host" in
  10.77.0.1) ns=${tag}a; name=node1 ;;
  10.77.0.2) ns=${tag}b; name=node2 ;;
  *) echo "netns_mpirun: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$name; \$*"
AGENT
chmod +x "$dir/rsh"

root=()
if [ "$(id -u)" = 0 ]; then root=(--allow-run-as-root); fi
pass=()
if [ -n "${PYRITE_DISTRIBUTED_DEBUG:-}" ]; then pass=(-x PYRITE_DISTRIBUTED_DEBUG); fi
# the program's path must work from inside the namespaces (same file system)
prog="$(realpath "$1")"; shift
ip netns exec "${tag}a" unshare --uts sh -c "hostname node1; exec mpirun ${root[*]} --hostfile $dir/hosts -np $np \
  --mca plm_rsh_agent $dir/rsh --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 \
  --mca oob_tcp_if_include 10.77.0.0/24 ${pass[*]} $prog $*"
