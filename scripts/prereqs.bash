# shellcheck shell=bash
# What the test clusters need from this machine, said once: sourced by scripts/test (which installs the
# packages before it starts the clusters), scripts/k8s-cluster and scripts/slurm-cluster (which refuse to
# start without them, naming the packages, before they start anything). Each *_missing_packages function
# prints the Debian packages whose programs are not here, one a line, and no function here ends the
# script: the callers decide, outside any command substitution, what a missing package means.
# The sourcing script defines log().

prereq_have() { command -v "$1" >/dev/null 2>&1; }

# The CNI plugins the pods' network is made with (the conflist of scripts/k8s-cluster: bridge with
# host-local; containerd adds loopback), searched in TORCHSPEC_K8S_CNI_DIRS (folders separated by colons),
# by default where Debian's containernetworking-plugins and the upstream release put them. Prints the first
# folder that has all three; fails when none has.
k8s_cni_dir() {
    local dirs d
    IFS=: read -r -a dirs <<<"${TORCHSPEC_K8S_CNI_DIRS-/usr/lib/cni:/opt/cni/bin}"
    for d in "${dirs[@]}"; do
        if [[ -n $d && -x $d/bridge && -x $d/host-local && -x $d/loopback ]]; then
            echo "$d"
            return 0
        fi
    done
    return 1
}

# The node's tools image is this machine's /bin/busybox alone, so it must need no dynamic loader.
k8s_static_busybox() {
    [[ -x /bin/busybox ]] || return 1
    local out
    out=$(LC_ALL=C ldd /bin/busybox 2>&1) || true
    [[ $out == *"not a dynamic"* || $out == *"statically linked"* ]]
}

# Every Debian package scripts/k8s-cluster up needs (Go and root it checks itself: Debian's golang-go is
# older than the modules of scripts/k8s ask for).
k8s_missing_packages() {
    prereq_have containerd && prereq_have ctr || echo containerd
    prereq_have runc || echo runc
    k8s_cni_dir >/dev/null || echo containernetworking-plugins
    k8s_static_busybox || echo busybox-static
    prereq_have ip || echo iproute2
    prereq_have openssl || echo openssl
    prereq_have curl || echo curl
    prereq_have pgrep || echo procps
    prereq_have python3 || prereq_have python || echo python3
}

# Every Debian package scripts/slurm-cluster start needs.
slurm_missing_packages() {
    local cmd
    for cmd in slurmctld slurmd sinfo sbatch scontrol; do
        prereq_have "$cmd" || { echo slurm-wlm; break; }
    done
    prereq_have munged && prereq_have munge && prereq_have unmunge || echo munge
    prereq_have pgrep && prereq_have ps || echo procps
}

# Quiet, non-interactive apt-get install; fails (with a line saying why) when that cannot be done here.
# `apt-get update` is slow, so it runs only when the package lists are missing or an install fails (stale
# lists). Another apt-get holding dpkg's lock (a second script setting up at the same time) is waited for.
apt_install() {
    if ! prereq_have apt-get; then
        log "no apt-get here: install $* yourself"
        return 1
    fi
    if [[ $(id -u) != 0 ]]; then
        log "only root may install $* (sudo apt-get install $*)"
        return 1
    fi
    log "installing $* with apt-get"
    local apt=(env DEBIAN_FRONTEND=noninteractive apt-get -qq -y -o Dpkg::Use-Pty=0 -o DPkg::Lock::Timeout=300)
    if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
        "${apt[@]}" update >/dev/null || return 1
    fi
    if ! "${apt[@]}" install "$@" >/dev/null; then
        log "apt-get install failed; updating the package lists and retrying"
        "${apt[@]}" update >/dev/null && "${apt[@]}" install "$@" >/dev/null
    fi
}
